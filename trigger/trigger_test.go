package trigger_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/enqueue"
	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/cassandra"
	"github.com/sundialhq/sundial/trigger"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testenv.GocqlSchemaAgreement())
}

func record(t testing.TB, tr *sundialv1.Trigger, enc sundialv1.Encoding) *kgo.Record {
	t.Helper()
	value, err := enc.Marshal(tr)
	require.NoError(t, err)
	return &kgo.Record{
		Key: []byte(tr.GetJobId()), Value: value, Timestamp: time.Date(2026, 3, 28, 9, 12, 45, 0, time.UTC),
		Headers: []kgo.RecordHeader{{Key: sundialv1.HeaderContentType, Value: []byte(enc.String())}},
	}
}

// TestTriggers runs on Kafka and Cassandra: a trigger is enqueued once
// whatever the number of times its key is sent; triggers of unknown, deleted
// and paused jobs and invalid ones are refused with a SKIPPED event.
func TestTriggers(t *testing.T) {
	t.Parallel()
	k := testenv.NeedKafka(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const shards = 4

	b := newTriggerStack(ctx, t, k, shards)
	st, names, producer, enq := b.store, b.names, b.producer, b.enq

	job := func(id string, paused bool) {
		spec := &sundialv1.JobSpec{Id: id, OwnerTeam: "ops", Paused: paused, Priority: sundialv1.Priority_PRIORITY_HIGH,
			Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "noop"}}}}
		value, err := proto.Marshal(spec)
		require.NoError(t, err)
		_, err = st.UpsertJob(ctx, store.Job{ID: id, Spec: value, Revision: 7, UpdatedAt: time.Now()})
		require.NoError(t, err)
	}
	job("ops.rebuild", false)
	job("ops.paused", true)
	job("ops.deleted", false)
	_, err := st.DeleteJob(ctx, "ops.deleted", 8, time.Now())
	require.NoError(t, err)

	events := newEventReader(t, k.Brokers, names.Events())
	reg := prometheus.NewRegistry()
	consumer, err := trigger.New(trigger.Config{
		Kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, Topics: names, Store: st, Enqueuer: enq, Registerer: reg,
		Logger: slog.New(slog.DiscardHandler), RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond,
	})
	require.NoError(t, err)
	require.NoError(t, consumer.Start(t.Context()))
	defer consumer.Stop()

	now := time.Now().UTC()
	first := &sundialv1.Trigger{JobId: "ops.rebuild", IdempotencyKey: "ticket-4711", RequestedAt: timestamppb.New(now), Payload: []byte("override"), Caller: "alice"}
	resent := proto.Clone(first).(*sundialv1.Trigger)
	resent.RequestedAt = timestamppb.New(now.Add(700 * time.Millisecond)) // a client resending builds a new request
	other := &sundialv1.Trigger{JobId: "ops.rebuild", IdempotencyKey: "ticket-4712", RequestedAt: timestamppb.New(now.Add(time.Second))}
	// The last record of ops.rebuild is invalid, so its refusal marks the
	// moment every earlier trigger of the job has been processed.
	marker := &sundialv1.Trigger{JobId: "ops.rebuild", RequestedAt: timestamppb.New(now.Add(2 * time.Second))}
	recs := []*kgo.Record{
		record(t, first, sundialv1.EncodingProtobuf),
		record(t, resent, sundialv1.EncodingJSON),
		record(t, first, sundialv1.EncodingProtobuf), // the very same request again
		record(t, other, sundialv1.EncodingProtobuf),
		record(t, marker, sundialv1.EncodingProtobuf),
		record(t, &sundialv1.Trigger{JobId: "ops.unknown", IdempotencyKey: "k", RequestedAt: timestamppb.New(now)}, sundialv1.EncodingJSON),
		record(t, &sundialv1.Trigger{JobId: "ops.deleted", IdempotencyKey: "k", RequestedAt: timestamppb.New(now)}, sundialv1.EncodingProtobuf),
		record(t, &sundialv1.Trigger{JobId: "ops.paused", IdempotencyKey: "k", RequestedAt: timestamppb.New(now)}, sundialv1.EncodingProtobuf),
		{Key: []byte("ops.rebuild")}, // a tombstone means nothing on this topic
	}
	for _, r := range recs {
		r.Topic = names.Triggers()
		r.Timestamp = time.Time{} // let the producer stamp it
	}
	require.NoError(t, producer.ProduceSync(ctx, recs...).FirstErr())

	got := events.wait(t, 4)
	byJob := map[string]*sundialv1.RunEvent{}
	for _, ev := range got {
		byJob[ev.GetJobId()] = ev
		assert.Equal(t, sundialv1.RunState_RUN_STATE_SKIPPED, ev.GetState())
	}
	assert.Equal(t, trigger.ReasonInvalid, byJob["ops.rebuild"].GetReason())
	assert.Contains(t, byJob["ops.rebuild"].GetError().GetMessage(), "idempotency_key: required")
	assert.Equal(t, trigger.ReasonJobDeleted, byJob["ops.unknown"].GetReason())
	assert.Contains(t, byJob["ops.unknown"].GetError().GetMessage(), `job_id "ops.unknown"`)
	assert.Equal(t, trigger.ReasonJobDeleted, byJob["ops.deleted"].GetReason())
	assert.Equal(t, trigger.ReasonPaused, byJob["ops.paused"].GetReason())
	assert.Equal(t, "ops", byJob["ops.paused"].GetOwnerTeam())
	assert.Equal(t, store.RunID("ops.paused", now.Truncate(time.Millisecond)), byJob["ops.paused"].GetRunId())

	// ticket-4711 runs once, at the first request's time; ticket-4712 is a
	// run of its own.
	var entries []store.DueEntry
	for _, due := range []time.Time{now, now.Add(time.Second)} {
		for e, err := range st.ListBucket(ctx, store.BucketOf(due), store.ShardOf("ops.rebuild", shards)) {
			require.NoError(t, err)
			if e.JobID == "ops.rebuild" && !slices.ContainsFunc(entries, func(x store.DueEntry) bool { return x.RunID == e.RunID }) {
				entries = append(entries, e)
			}
		}
	}
	require.Len(t, entries, 2, "%v", entries)
	slices.SortFunc(entries, func(a, b store.DueEntry) int { return a.Due.Compare(b.Due) })
	e := entries[0]
	assert.Equal(t, store.KindTrigger, e.Kind)
	assert.Equal(t, store.RunID("ops.rebuild", now.Truncate(time.Millisecond)), e.RunID)
	assert.Equal(t, int64(7), e.Revision)
	carried := &sundialv1.Trigger{}
	require.NoError(t, proto.Unmarshal(e.Payload, carried))
	assert.Equal(t, []byte("override"), carried.GetPayload(), "the entry carries the payload override")
	assert.Equal(t, "ticket-4711", carried.GetIdempotencyKey())
	assert.Equal(t, store.RunID("ops.rebuild", now.Add(time.Second).Truncate(time.Millisecond)), entries[1].RunID)

	families, err := reg.Gather()
	require.NoError(t, err)
	outcomes := map[string]float64{}
	for _, f := range families {
		if f.GetName() == "sundial_trigger_records_total" {
			for _, m := range f.GetMetric() {
				outcomes[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	// The resent request is a duplicate; the very same request read again
	// is enqueued again, with the same entry.
	assert.Equal(t, float64(1), outcomes["duplicate"])
	assert.Equal(t, float64(3), outcomes["enqueued"])
}

// eventReader collects every RunEvent of sundial.events.
type eventReader struct {
	mu     sync.Mutex
	cond   *sync.Cond
	events []*sundialv1.RunEvent
	err    error
}

func newEventReader(t *testing.T, brokers []string, topic string) *eventReader {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	require.NoError(t, err)
	r := &eventReader{}
	r.cond = sync.NewCond(&r.mu)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil || fs.IsClientClosed() {
				return
			}
			r.mu.Lock()
			fs.EachRecord(func(rec *kgo.Record) {
				if isDagRunEvent(rec) {
					return // a DAG run's own event, published by the DAG engine's Runs
				}
				ev := &sundialv1.RunEvent{}
				if err := proto.Unmarshal(rec.Value, ev); err != nil {
					r.err = err
				}
				r.events = append(r.events, ev)
			})
			r.cond.Broadcast()
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		cl.Close()
	})
	return r
}

func (r *eventReader) wait(t *testing.T, n int) []*sundialv1.RunEvent {
	t.Helper()
	timer := time.AfterFunc(time.Minute, func() {
		r.mu.Lock()
		r.err = context.DeadlineExceeded
		r.cond.Broadcast()
		r.mu.Unlock()
	})
	defer timer.Stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.events) < n {
		require.NoError(t, r.err)
		r.cond.Wait()
	}
	require.NoError(t, r.err)
	return slices.Clone(r.events)
}

// waitJob waits for an answer about job and returns it. Answers are at least
// once, so an earlier answer about another job may come again before it.
func (r *eventReader) waitJob(t *testing.T, job string) *sundialv1.RunEvent {
	t.Helper()
	for n := 1; ; n++ {
		if e := r.wait(t, n)[n-1]; e.GetJobId() == job {
			return e
		}
	}
}

// triggerStack is what a trigger test runs on: a migrated keyspace of its
// own with the cluster initialised, the topics a consumer reads and writes,
// a producer that partitions as the enqueuer does, and an enqueuer. Both
// clients are closed at cleanup.
type triggerStack struct {
	store    *cassandra.Store
	names    topics.Names
	producer *kgo.Client
	enq      *enqueue.Enqueuer
}

func newTriggerStack(ctx context.Context, t *testing.T, k testenv.Kafka, shards int) triggerStack {
	t.Helper()
	c := testenv.NeedCassandra(t)
	cfg := cassandra.Config{Hosts: c.Hosts, Keyspace: c.Keyspace}
	_, err := cassandra.Migrate(ctx, cfg)
	require.NoError(t, err)
	st, err := cassandra.Open(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	_, err = st.InitCluster(ctx, shards)
	require.NoError(t, err)

	names := topics.Names{Prefix: k.TopicPrefix}
	all, err := names.Specs(shards)
	require.NoError(t, err)
	var specs []topics.Spec
	for _, s := range all {
		if slices.Contains([]string{names.Triggers(), names.Shards(), names.Events()}, s.Name) {
			specs = append(specs, s)
		}
	}
	producer, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.RecordPartitioner(enqueue.Partitioner(names, nil)))
	require.NoError(t, err)
	t.Cleanup(producer.Close)
	_, err = topics.Ensure(ctx, kadm.NewClient(producer), specs, -1)
	require.NoError(t, err)
	enq, err := enqueue.New(enqueue.Config{Store: st, Client: producer, Topics: names, Shards: shards})
	require.NoError(t, err)
	return triggerStack{store: st, names: names, producer: producer, enq: enq}
}
