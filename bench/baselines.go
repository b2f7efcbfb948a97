package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/leasing"
	"github.com/sundialhq/sundial/store"
)

// KafkaBaseline is K: raw franz-go produce→consume on one topic, with the
// payload size, partition count and producer settings of the pipeline's
// runs topic (the dispatcher's producer: linger 0, acks from all in-sync
// replicas, idempotent, keyed by job id).
type KafkaBaseline struct {
	RecordsPerSec float64 `json:"records_per_sec"`
	// E2E is the produce call → consume latency of the records, ms.
	E2EP50Ms     float64 `json:"e2e_p50_ms"`
	E2EP95Ms     float64 `json:"e2e_p95_ms"`
	E2EP99Ms     float64 `json:"e2e_p99_ms"`
	Records      int64   `json:"records"`
	PayloadBytes int     `json:"payload_bytes"`
	Partitions   int32   `json:"partitions"`
	Producer     string  `json:"producer"`
	Seconds      float64 `json:"seconds"`
}

// RedisBaseline is R: EVALSHA calls/s of the lease scripts through the
// leasing package's Store (acquire then complete, two calls per run), plain
// (one call per round trip, Concurrency callers) and pipelined (AcquireBatch
// and CompleteBatch of Batch calls).
type RedisBaseline struct {
	PlainCallsPerSec     float64 `json:"plain_calls_per_sec"`
	PipelinedCallsPerSec float64 `json:"pipelined_calls_per_sec"`
	Concurrency          int     `json:"concurrency"`
	Batch                int     `json:"batch"`
	Seconds              float64 `json:"seconds_each"`
}

// CassandraBaseline is C: due-entry writes/s through the store's PutDue,
// one entry per call as the dispatcher writes a next occurrence,
// Concurrency calls in flight.
type CassandraBaseline struct {
	WritesPerSec float64 `json:"writes_per_sec"`
	Concurrency  int     `json:"concurrency"`
	Writes       int64   `json:"writes"`
	Seconds      float64 `json:"seconds"`
}

// MeasureKafka produces keyed records of payloadBytes to a new topic of
// partitions partitions for d, consuming them at the same time, and reports
// the consumed records/s and the end-to-end latency. The window of d starts
// once a first record has been consumed. The topic is deleted afterwards.
func MeasureKafka(ctx context.Context, brokers []string, topic string, partitions int32, payloadBytes int, d time.Duration) (KafkaBaseline, error) {
	res := KafkaBaseline{PayloadBytes: payloadBytes, Partitions: partitions, Producer: "franz-go, linger 0, acks=all, idempotent, key = job id"}
	adm, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return res, fmt.Errorf("baseline K: admin client: %w", err)
	}
	defer adm.Close()
	spec := topics.Spec{Name: topic, Partitions: partitions}
	if _, err := topics.Ensure(ctx, kadm.NewClient(adm), []topics.Spec{spec}, 1); err != nil {
		return res, fmt.Errorf("baseline K: create topic: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = kadm.NewClient(adm).DeleteTopics(dctx, topic)
	}()

	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(0), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MaxBufferedRecords(20000))
	if err != nil {
		return res, fmt.Errorf("baseline K: producer: %w", err)
	}
	defer prod.Close()
	cons, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		return res, fmt.Errorf("baseline K: consumer: %w", err)
	}
	defer cons.Close()

	value := make([]byte, payloadBytes)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	// The window starts once a first record has made the round trip: the
	// new topic's partitions and both clients' metadata are ready, so a
	// busy machine's slow start is not measured as a rate of nothing.
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("first"), Value: value}).FirstErr(); err != nil {
		return res, fmt.Errorf("baseline K: first record: %w", err)
	}
	for first := false; !first; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			return res, fmt.Errorf("baseline K: waiting for the first record: %w", ctx.Err())
		}
		first = fs.NumRecords() > 0
	}
	hist := hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)
	var consumed atomic.Int64
	var produceErr atomic.Value
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; runCtx.Err() == nil; i++ {
			rec := &kgo.Record{Topic: topic, Key: []byte("job-" + strconv.Itoa(i%100000)), Value: value}
			prod.Produce(runCtx, rec, func(_ *kgo.Record, err error) {
				if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
					produceErr.Store(err)
				}
			})
		}
	})
	var last time.Time
	wg.Go(func() {
		for {
			fs := cons.PollFetches(runCtx)
			if runCtx.Err() != nil {
				return
			}
			now := time.Now()
			fs.EachRecord(func(r *kgo.Record) {
				us := max(now.Sub(r.Timestamp).Microseconds(), 1)
				_ = hist.RecordValue(min(us, hist.HighestTrackableValue()))
				consumed.Add(1)
			})
			last = now
		}
	})
	wg.Wait()
	if err, ok := produceErr.Load().(error); ok {
		return res, fmt.Errorf("baseline K: produce: %w", err)
	}
	elapsed := last.Sub(start).Seconds()
	if elapsed <= 0 || consumed.Load() == 0 {
		return res, errors.New("baseline K: nothing consumed")
	}
	res.Records = consumed.Load()
	res.Seconds = elapsed
	res.RecordsPerSec = float64(res.Records) / elapsed
	res.E2EP50Ms = float64(hist.ValueAtQuantile(50)) / 1000
	res.E2EP95Ms = float64(hist.ValueAtQuantile(95)) / 1000
	res.E2EP99Ms = float64(hist.ValueAtQuantile(99)) / 1000
	return res, nil
}

// MeasureRedis runs acquire+complete pairs through s for d plain, then d
// pipelined, over 1,000 jobs with a new run id each time, as the runner
// does (every complete writes a dedupe mark).
func MeasureRedis(ctx context.Context, s *leasing.Store, concurrency, batch int, d time.Duration) (RedisBaseline, error) {
	res := RedisBaseline{Concurrency: concurrency, Batch: batch, Seconds: d.Seconds()}
	if err := s.Load(ctx); err != nil {
		return res, fmt.Errorf("baseline R: %w", err)
	}
	var seq atomic.Int64
	next := func() leasing.Request {
		n := seq.Add(1)
		job := "rjob" + strconv.FormatInt(n%1000, 10)
		return leasing.Request{JobID: job, RunID: job + "@" + strconv.FormatInt(n, 10), Limit: 1 << 20}
	}
	measure := func(worker func(ctx context.Context) (int64, error)) (float64, error) {
		runCtx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		var calls atomic.Int64
		eg, egCtx := errgroup.WithContext(runCtx)
		start := time.Now()
		for range concurrency {
			eg.Go(func() error {
				for egCtx.Err() == nil {
					n, err := worker(egCtx)
					if err != nil {
						if egCtx.Err() != nil {
							return nil //nolint:nilerr // the deadline cut the call: the measurement is over
						}
						return err
					}
					calls.Add(n)
				}
				return nil
			})
		}
		if err := eg.Wait(); err != nil {
			return 0, err
		}
		return float64(calls.Load()) / time.Since(start).Seconds(), nil
	}
	plain, err := measure(func(ctx context.Context) (int64, error) {
		l, err := s.Acquire(ctx, next())
		if err != nil {
			return 0, err
		}
		if err := s.Complete(ctx, l); err != nil {
			return 1, err
		}
		return 2, nil
	})
	if err != nil {
		return res, fmt.Errorf("baseline R plain: %w", err)
	}
	res.PlainCallsPerSec = plain
	piped, err := measure(func(ctx context.Context) (int64, error) {
		rs := make([]leasing.Request, batch)
		for i := range rs {
			rs[i] = next()
		}
		leases := make([]leasing.Lease, 0, batch)
		for _, r := range s.AcquireBatch(ctx, rs) {
			if r.Err != nil {
				return 0, r.Err
			}
			leases = append(leases, r.Lease)
		}
		for _, err := range s.CompleteBatch(ctx, leases) {
			if err != nil {
				return int64(batch), err
			}
		}
		return int64(2 * batch), nil
	})
	if err != nil {
		return res, fmt.Errorf("baseline R pipelined: %w", err)
	}
	res.PipelinedCallsPerSec = piped
	return res, nil
}

// MeasureCassandra writes due entries of the scheduled shape (job id, run
// id, revision, no payload) one per PutDue call, concurrency at once, for d.
// Their due times lie two days back, beyond every dispatcher's catch-up
// horizon, so no dispatcher of the same keyspace ever reads them.
func MeasureCassandra(ctx context.Context, s store.Schedule, concurrency int, d time.Duration, now time.Time) (CassandraBaseline, error) {
	res := CassandraBaseline{Concurrency: concurrency}
	base := now.Add(-48 * time.Hour).Truncate(time.Minute)
	var seq, done atomic.Int64
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	eg, egCtx := errgroup.WithContext(runCtx)
	start := time.Now()
	for range concurrency {
		eg.Go(func() error {
			for egCtx.Err() == nil {
				n := seq.Add(1)
				job := "cjob-" + strconv.FormatInt(n%100000, 10)
				due := store.Truncate(base.Add(time.Duration(n%600_000) * time.Millisecond))
				e := store.DueEntry{Due: due, JobID: job, Kind: store.KindScheduled, RunID: store.RunID(job, due), Attempt: 1, Revision: n}
				if err := s.PutDue(egCtx, e); err != nil {
					if egCtx.Err() != nil {
						return nil //nolint:nilerr // the deadline cut the write: the measurement is over
					}
					return err
				}
				done.Add(1)
			}
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return res, fmt.Errorf("baseline C: %w", err)
	}
	elapsed := time.Since(start).Seconds()
	res.Writes = done.Load()
	res.Seconds = elapsed
	res.WritesPerSec = float64(res.Writes) / elapsed
	return res, nil
}

// PerRun is the backend work of one run, counted from the code paths of
// the pipeline (see the bench package doc).
type PerRun struct {
	LeaseCalls      int    `json:"lease_calls"`
	CassandraWrites int    `json:"cassandra_writes"`
	CassandraReads  int    `json:"cassandra_reads"`
	KafkaRecords    int    `json:"kafka_records"`
	Explanation     string `json:"explanation"`
}

// Bottleneck is B = min(K, R / lease calls per run, C / writes per run); a
// backend a run does not write to is no term of it.
func Bottleneck(k KafkaBaseline, r RedisBaseline, c CassandraBaseline, per PerRun) (float64, string) {
	rPlain := r.PlainCallsPerSec / float64(per.LeaseCalls)
	b, which := k.RecordsPerSec, "K (Kafka)"
	if rPlain < b {
		b, which = rPlain, "R (Redis leases, plain)"
	}
	if per.CassandraWrites == 0 {
		return b, which
	}
	if cRuns := c.WritesPerSec / float64(per.CassandraWrites); cRuns < b {
		b, which = cRuns, "C (Cassandra writes)"
	}
	if math.IsNaN(b) || math.IsInf(b, 0) {
		return 0, "unknown"
	}
	return b, which
}

// Limit is L = min(K, R / 2, C / 1): the runs/s the backends would carry
// if a run cost only the least work it can ever need, one Kafka record (the
// run record), two lease calls (acquire and complete) and one Cassandra
// write (the next occurrence). Unlike B it does not depend on what the
// pipeline does today, so sustained / L says how far the pipeline is from
// what the backends of this machine allow at all.
func Limit(k KafkaBaseline, r RedisBaseline, c CassandraBaseline) (float64, string) {
	return Bottleneck(k, r, c, PerRun{LeaseCalls: 2, CassandraWrites: 1})
}

// redisVersion reads INFO server.
func redisVersion(ctx context.Context, rc redis.UniversalClient) string {
	info, err := rc.InfoMap(ctx, "server").Result()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return info["Server"]["redis_version"]
}

// compactRedisLog has a Redis that keeps an append-only file rewrite it
// (BGREWRITEAOF) and waits until the rewrite is done. The R baseline
// drives a million and more lease scripts through Redis in a minute, all
// of them in the file; a Redis restarted later replays every one before it
// serves (88 s for about 1 GB on the two-core machine, when the chaos
// scenario killed it 150 s into the window). After the rewrite the file
// holds the dataset once, and a restart replays only what the window
// wrote. done is false, with no error, when Redis keeps no such file.
func compactRedisLog(ctx context.Context, rc redis.UniversalClient) (done bool, err error) {
	info, err := rc.InfoMap(ctx, "persistence").Result()
	if err != nil {
		return false, fmt.Errorf("compact the redis log: %w", err)
	}
	if info["Persistence"]["aof_enabled"] != "1" {
		return false, nil
	}
	// A rewrite already under way (Redis's own, past its growth threshold)
	// answers an error; waiting for it does as well.
	if err := rc.BgRewriteAOF(ctx).Err(); err != nil && !strings.Contains(err.Error(), "in progress") {
		return false, fmt.Errorf("compact the redis log: BGREWRITEAOF: %w", err)
	}
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		info, err := rc.InfoMap(ctx, "persistence").Result()
		if err != nil {
			return false, fmt.Errorf("compact the redis log: %w", err)
		}
		p := info["Persistence"]
		if p["aof_rewrite_in_progress"] == "0" && p["aof_rewrite_scheduled"] == "0" {
			if p["aof_last_bgrewrite_status"] != "ok" {
				return false, fmt.Errorf("compact the redis log: the rewrite ended %q", p["aof_last_bgrewrite_status"])
			}
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("compact the redis log: %w", ctx.Err())
		case <-t.C:
		}
	}
}
