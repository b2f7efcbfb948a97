package telemetry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Work is the backend work a component asked for: requests its clients sent
// and what they carried, counted by the clients' own hooks. Each attempt
// and each page is a request (the backend did the work, whatever became of
// it).
type Work struct {
	// CassandraReads are SELECT requests, one per page.
	CassandraReads int64 `json:"cassandra_reads"`
	// CassandraWrites are single INSERT, UPDATE and DELETE statements that
	// are not lightweight transactions.
	CassandraWrites int64 `json:"cassandra_writes"`
	// CassandraLWT are lightweight transactions (statements or batches
	// with IF): each costs a Paxos round, several times a write.
	CassandraLWT int64 `json:"cassandra_lwt"`
	// CassandraBatches are batch requests; CassandraBatchRows the
	// statements they carried.
	CassandraBatches   int64 `json:"cassandra_batches"`
	CassandraBatchRows int64 `json:"cassandra_batch_rows"`
	// KafkaProduceRequests are produce requests written to brokers;
	// KafkaRecords and KafkaBatches what was acknowledged in them.
	KafkaProduceRequests int64 `json:"kafka_produce_requests"`
	KafkaRecords         int64 `json:"kafka_records"`
	KafkaBatches         int64 `json:"kafka_batches"`
	// KafkaFetchRequests are fetch requests; KafkaOtherRequests every
	// other request (metadata, heartbeats, offset commits...).
	KafkaFetchRequests int64 `json:"kafka_fetch_requests"`
	KafkaOtherRequests int64 `json:"kafka_other_requests"`
	// RedisRoundTrips are commands and pipelines sent (a pipeline is one
	// round trip); RedisCommands the commands they carried.
	RedisRoundTrips int64 `json:"redis_round_trips"`
	RedisCommands   int64 `json:"redis_commands"`
}

// CassandraRequests is every request sent to Cassandra.
func (w Work) CassandraRequests() int64 {
	return w.CassandraReads + w.CassandraWrites + w.CassandraLWT + w.CassandraBatches
}

// Sub is the work done between o and w (o taken first).
func (w Work) Sub(o Work) Work {
	return w.zip(o, func(a, b int64) int64 { return a - b })
}

// Add is the work of both.
func (w Work) Add(o Work) Work {
	return w.zip(o, func(a, b int64) int64 { return a + b })
}

func (w Work) zip(o Work, f func(a, b int64) int64) Work {
	return Work{
		CassandraReads: f(w.CassandraReads, o.CassandraReads), CassandraWrites: f(w.CassandraWrites, o.CassandraWrites),
		CassandraLWT: f(w.CassandraLWT, o.CassandraLWT), CassandraBatches: f(w.CassandraBatches, o.CassandraBatches),
		CassandraBatchRows:   f(w.CassandraBatchRows, o.CassandraBatchRows),
		KafkaProduceRequests: f(w.KafkaProduceRequests, o.KafkaProduceRequests), KafkaRecords: f(w.KafkaRecords, o.KafkaRecords),
		KafkaBatches: f(w.KafkaBatches, o.KafkaBatches), KafkaFetchRequests: f(w.KafkaFetchRequests, o.KafkaFetchRequests),
		KafkaOtherRequests: f(w.KafkaOtherRequests, o.KafkaOtherRequests),
		RedisRoundTrips:    f(w.RedisRoundTrips, o.RedisRoundTrips), RedisCommands: f(w.RedisCommands, o.RedisCommands),
	}
}

// Per is w divided among runs: the work of one run.
func (w Work) Per(runs float64) WorkPerRun {
	d := func(n int64) float64 {
		if runs <= 0 {
			return 0
		}
		return float64(n) / runs
	}
	return WorkPerRun{
		CassandraRequests: d(w.CassandraRequests()), CassandraReads: d(w.CassandraReads), CassandraWrites: d(w.CassandraWrites),
		CassandraLWT: d(w.CassandraLWT), CassandraBatches: d(w.CassandraBatches), CassandraBatchRows: d(w.CassandraBatchRows),
		KafkaProduceRequests: d(w.KafkaProduceRequests), KafkaRecords: d(w.KafkaRecords), KafkaFetchRequests: d(w.KafkaFetchRequests),
		KafkaOtherRequests: d(w.KafkaOtherRequests),
		RedisRoundTrips:    d(w.RedisRoundTrips), RedisCommands: d(w.RedisCommands),
	}
}

// WorkPerRun is Work divided among the runs it served.
type WorkPerRun struct {
	CassandraRequests    float64 `json:"cassandra_requests"`
	CassandraReads       float64 `json:"cassandra_reads"`
	CassandraWrites      float64 `json:"cassandra_writes"`
	CassandraLWT         float64 `json:"cassandra_lwt"`
	CassandraBatches     float64 `json:"cassandra_batches"`
	CassandraBatchRows   float64 `json:"cassandra_batch_rows"`
	KafkaProduceRequests float64 `json:"kafka_produce_requests"`
	KafkaRecords         float64 `json:"kafka_records"`
	KafkaFetchRequests   float64 `json:"kafka_fetch_requests"`
	KafkaOtherRequests   float64 `json:"kafka_other_requests"`
	RedisRoundTrips      float64 `json:"redis_round_trips"`
	RedisCommands        float64 `json:"redis_commands"`
}

// WorkCounter counts the Work of one component from the hooks of its
// clients: set it as the QueryObserver and BatchObserver of its gocql
// cluster (Then keeps another observer), add KafkaHooks to each of its
// franz-go clients and RedisHook to its go-redis client. Counting is a few
// atomic additions per request. The zero value is ready.
type WorkCounter struct {
	cqlReads, cqlWrites, cqlLWT, cqlBatches, cqlBatchRows atomic.Int64
	produceReqs, records, batches, fetchReqs, otherReqs   atomic.Int64
	redisTrips, redisCmds                                 atomic.Int64

	kinds stmtKinds

	query gocql.QueryObserver
	batch gocql.BatchObserver
}

var (
	_ gocql.QueryObserver         = (*WorkCounter)(nil)
	_ gocql.BatchObserver         = (*WorkCounter)(nil)
	_ kgo.HookBrokerWrite         = workKafkaHook{}
	_ kgo.HookProduceBatchWritten = workKafkaHook{}
)

// Then makes the counter pass every observation on to q and b (either may
// be nil), so that a session can be both counted and measured. Call it
// before the session opens.
func (c *WorkCounter) Then(q gocql.QueryObserver, b gocql.BatchObserver) *WorkCounter {
	c.query, c.batch = q, b
	return c
}

// Work is what was counted so far.
func (c *WorkCounter) Work() Work {
	return Work{
		CassandraReads: c.cqlReads.Load(), CassandraWrites: c.cqlWrites.Load(), CassandraLWT: c.cqlLWT.Load(),
		CassandraBatches: c.cqlBatches.Load(), CassandraBatchRows: c.cqlBatchRows.Load(),
		KafkaProduceRequests: c.produceReqs.Load(), KafkaRecords: c.records.Load(), KafkaBatches: c.batches.Load(),
		KafkaFetchRequests: c.fetchReqs.Load(), KafkaOtherRequests: c.otherReqs.Load(),
		RedisRoundTrips: c.redisTrips.Load(), RedisCommands: c.redisCmds.Load(),
	}
}

// ObserveQuery implements gocql.QueryObserver.
func (c *WorkCounter) ObserveQuery(ctx context.Context, q gocql.ObservedQuery) {
	k := c.kinds.kind(q.Statement)
	switch {
	case k.op == "select":
		c.cqlReads.Add(1)
	case strings.HasSuffix(k.op, "_lwt"):
		c.cqlLWT.Add(1)
	case k.op == "insert", k.op == "update", k.op == "delete":
		c.cqlWrites.Add(1)
	}
	if c.query != nil {
		c.query.ObserveQuery(ctx, q)
	}
}

// ObserveBatch implements gocql.BatchObserver.
func (c *WorkCounter) ObserveBatch(ctx context.Context, b gocql.ObservedBatch) {
	lwt := false
	for _, s := range b.Statements {
		if strings.HasSuffix(c.kinds.kind(s).op, "_lwt") {
			lwt = true
			break
		}
	}
	if lwt {
		c.cqlLWT.Add(1)
	} else {
		c.cqlBatches.Add(1)
	}
	c.cqlBatchRows.Add(int64(len(b.Statements)))
	if c.batch != nil {
		c.batch.ObserveBatch(ctx, b)
	}
}

// KafkaHooks is the client option that counts a franz-go client's requests
// and produced records.
func (c *WorkCounter) KafkaHooks() kgo.Opt { return kgo.WithHooks(c.KafkaHook()) }

// KafkaHook is the hook of KafkaHooks, to add beside others.
func (c *WorkCounter) KafkaHook() kgo.Hook { return workKafkaHook{c} }

type workKafkaHook struct{ c *WorkCounter }

// Request keys of the Kafka protocol.
const (
	kafkaProduceKey int16 = 0
	kafkaFetchKey   int16 = 1
)

func (h workKafkaHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		return
	}
	switch key {
	case kafkaProduceKey:
		h.c.produceReqs.Add(1)
	case kafkaFetchKey:
		h.c.fetchReqs.Add(1)
	default:
		h.c.otherReqs.Add(1)
	}
}

func (h workKafkaHook) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	h.c.batches.Add(1)
	h.c.records.Add(int64(m.NumRecords))
}

// RedisHook is the go-redis hook that counts round trips and commands.
func (c *WorkCounter) RedisHook() redis.Hook { return workRedisHook{c} }

type workRedisHook struct{ c *WorkCounter }

func (h workRedisHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h workRedisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.c.redisTrips.Add(1)
		h.c.redisCmds.Add(1)
		return next(ctx, cmd)
	}
}

func (h workRedisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.c.redisTrips.Add(1)
		h.c.redisCmds.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// workMetric names the series of sundial_backend_requests_total.
type workMetric struct {
	backend, kind string
	get           func(Work) int64
	set           func(*Work, int64)
}

var workMetrics = []workMetric{
	{"cassandra", "read", func(w Work) int64 { return w.CassandraReads }, func(w *Work, n int64) { w.CassandraReads = n }},
	{"cassandra", "write", func(w Work) int64 { return w.CassandraWrites }, func(w *Work, n int64) { w.CassandraWrites = n }},
	{"cassandra", "lwt", func(w Work) int64 { return w.CassandraLWT }, func(w *Work, n int64) { w.CassandraLWT = n }},
	{"cassandra", "batch", func(w Work) int64 { return w.CassandraBatches }, func(w *Work, n int64) { w.CassandraBatches = n }},
	{"cassandra", "batch_row", func(w Work) int64 { return w.CassandraBatchRows }, func(w *Work, n int64) { w.CassandraBatchRows = n }},
	{"kafka", "produce", func(w Work) int64 { return w.KafkaProduceRequests }, func(w *Work, n int64) { w.KafkaProduceRequests = n }},
	{"kafka", "record", func(w Work) int64 { return w.KafkaRecords }, func(w *Work, n int64) { w.KafkaRecords = n }},
	{"kafka", "batch", func(w Work) int64 { return w.KafkaBatches }, func(w *Work, n int64) { w.KafkaBatches = n }},
	{"kafka", "fetch", func(w Work) int64 { return w.KafkaFetchRequests }, func(w *Work, n int64) { w.KafkaFetchRequests = n }},
	{"kafka", "other", func(w Work) int64 { return w.KafkaOtherRequests }, func(w *Work, n int64) { w.KafkaOtherRequests = n }},
	{"redis", "round_trip", func(w Work) int64 { return w.RedisRoundTrips }, func(w *Work, n int64) { w.RedisRoundTrips = n }},
	{"redis", "command", func(w Work) int64 { return w.RedisCommands }, func(w *Work, n int64) { w.RedisCommands = n }},
}

// WorkMetricName is the counter Register exports, labelled backend and kind.
const WorkMetricName = "sundial_backend_requests_total"

var workDesc = prometheus.NewDesc(WorkMetricName,
	"Requests this process sent to its backends and what they carried, counted by the clients' hooks, by backend and kind "+
		"(cassandra: read, write, lwt, batch, batch_row; kafka: produce, record, batch, fetch, other; redis: round_trip, command).",
	[]string{"backend", "kind"}, nil)

// Register exports the counts on reg as sundial_backend_requests_total.
func (c *WorkCounter) Register(reg prometheus.Registerer) error {
	if err := reg.Register(workCollector{c}); err != nil {
		return fmt.Errorf("telemetry: work counter: register metrics: %w", err)
	}
	return nil
}

type workCollector struct{ c *WorkCounter }

func (w workCollector) Describe(ch chan<- *prometheus.Desc) { ch <- workDesc }

func (w workCollector) Collect(ch chan<- prometheus.Metric) {
	work := w.c.Work()
	for _, m := range workMetrics {
		ch <- prometheus.MustNewConstMetric(workDesc, prometheus.CounterValue, float64(m.get(work)), m.backend, m.kind)
	}
}

// WorkSeries is one series of sundial_backend_requests_total.
type WorkSeries struct {
	Backend, Kind string
	Value         float64
}

// WorkFromSeries rebuilds Work from the series of
// sundial_backend_requests_total: how a process's counts are read back
// from its /metrics. An unknown series is an error naming it.
func WorkFromSeries(series []WorkSeries) (Work, error) {
	var w Work
	var errs []error
	for _, s := range series {
		found := false
		for _, m := range workMetrics {
			if m.backend == s.Backend && m.kind == s.Kind {
				m.set(&w, int64(s.Value))
				found = true
			}
		}
		if !found {
			errs = append(errs, fmt.Errorf("%s{backend=%q, kind=%q}: unknown series", WorkMetricName, s.Backend, s.Kind))
		}
	}
	return w, errors.Join(errs...)
}
