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
	goleak.VerifyTestMain(m)
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

func TestDecode(t *testing.T) {
	t.Parallel()
	requested := time.Date(2026, 3, 28, 9, 12, 44, 318_400_000, time.UTC)
	base := func() *sundialv1.Trigger {
		return &sundialv1.Trigger{JobId: "billing.x", IdempotencyKey: "k", RequestedAt: timestamppb.New(requested)}
	}
	cases := []struct {
		name   string
		rec    func() *kgo.Record
		field  string
		reason string
	}{
		{"valid json", func() *kgo.Record { return record(t, base(), sundialv1.EncodingJSON) }, "", ""},
		{"valid protobuf", func() *kgo.Record { return record(t, base(), sundialv1.EncodingProtobuf) }, "", ""},
		{"key differs", func() *kgo.Record {
			r := record(t, base(), sundialv1.EncodingJSON)
			r.Key = []byte("other")
			return r
		}, "job_id", `differs from the record key "other"`},
		{"key not an id", func() *kgo.Record {
			tr := base()
			tr.JobId = "a@b"
			return record(t, tr, sundialv1.EncodingJSON)
		}, "key", "not a job id"},
		{"job id missing", func() *kgo.Record {
			r := record(t, &sundialv1.Trigger{IdempotencyKey: "k"}, sundialv1.EncodingProtobuf)
			r.Key = []byte("billing.x")
			return r
		}, "job_id", "required"},
		{"idempotency key missing", func() *kgo.Record {
			tr := base()
			tr.IdempotencyKey = ""
			return record(t, tr, sundialv1.EncodingJSON)
		}, "idempotency_key", "required"},
		{"idempotency key too long", func() *kgo.Record {
			tr := base()
			tr.IdempotencyKey = string(make([]byte, 201))
			return record(t, tr, sundialv1.EncodingProtobuf)
		}, "idempotency_key", "at most 200"},
		{"requested in the future", func() *kgo.Record {
			tr := base()
			tr.RequestedAt = timestamppb.New(requested.Add(time.Hour))
			return record(t, tr, sundialv1.EncodingJSON)
		}, "requested_at", "after the record's timestamp"},
		{"requested at invalid", func() *kgo.Record {
			tr := base()
			tr.RequestedAt = &timestamppb.Timestamp{Nanos: -1}
			return record(t, tr, sundialv1.EncodingProtobuf)
		}, "requested_at", "invalid timestamp"},
		{"payload too large", func() *kgo.Record {
			tr := base()
			tr.Payload = make([]byte, 1025)
			return record(t, tr, sundialv1.EncodingProtobuf)
		}, "payload", "1025 bytes, at most 1024"},
		{"caller too long", func() *kgo.Record {
			tr := base()
			tr.Caller = string(make([]byte, 201))
			return record(t, tr, sundialv1.EncodingProtobuf)
		}, "caller", "at most 200"},
		{"content type", func() *kgo.Record {
			r := record(t, base(), sundialv1.EncodingJSON)
			r.Headers[0].Value = []byte("text/plain")
			return r
		}, "content_type", "text/plain"},
		{"undecodable", func() *kgo.Record {
			r := record(t, base(), sundialv1.EncodingJSON)
			r.Headers = nil
			return r
		}, "record", "looks like JSON"},
		{"empty", func() *kgo.Record { return &kgo.Record{Key: []byte("billing.x"), Value: []byte{}} }, "record", "no value"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d, errs := trigger.Decode(c.rec(), 1024)
			if c.field == "" {
				require.Empty(t, errs)
				assert.Equal(t, "billing.x", d.JobID)
				assert.Equal(t, requested.Truncate(time.Millisecond), d.Due, "due is requested_at at millisecond precision")
				return
			}
			require.NotEmpty(t, errs)
			assert.Equal(t, c.field, errs[0].Field, "%v", errs)
			assert.Contains(t, errs[0].Reason, c.reason)
		})
	}

	// Without requested_at the record's timestamp is the due time.
	tr := base()
	tr.RequestedAt = nil
	rec := record(t, tr, sundialv1.EncodingProtobuf)
	d, errs := trigger.Decode(rec, 1024)
	require.Empty(t, errs)
	assert.Equal(t, rec.Timestamp, d.Due)
}

func FuzzDecode(f *testing.F) {
	tr := &sundialv1.Trigger{JobId: "j", IdempotencyKey: "k", RequestedAt: timestamppb.New(time.Unix(1e9, 0)), Payload: []byte("p")}
	pb, _ := proto.Marshal(tr)
	js, _ := sundialv1.EncodingJSON.Marshal(tr)
	f.Add([]byte("j"), pb, "")
	f.Add([]byte("j"), js, "application/json")
	f.Fuzz(func(t *testing.T, key, value []byte, contentType string) {
		rec := &kgo.Record{Key: key, Value: value, Timestamp: time.Unix(1e9, 0),
			Headers: []kgo.RecordHeader{{Key: "content-type", Value: []byte(contentType)}}}
		d, errs := trigger.Decode(rec, 1024)
		for _, e := range errs {
			if e.Field == "" || e.Reason == "" {
				t.Fatalf("error without field or reason: %+v", e)
			}
		}
		if len(errs) == 0 {
			if d.Trigger.GetJobId() != string(key) || d.Trigger.GetIdempotencyKey() == "" || d.Due.IsZero() {
				t.Fatalf("accepted an incomplete trigger: %v", d.Trigger)
			}
		}
	})
}

// TestTriggers runs on Kafka and Cassandra: a trigger is enqueued once
// whatever the number of times its key is sent; triggers of unknown, deleted
// and paused jobs and invalid ones are refused with a SKIPPED event.
func TestTriggers(t *testing.T) {
	t.Parallel()
	k := testenv.NeedKafka(t)
	c := testenv.NeedCassandra(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const shards = 4

	cfg := cassandra.Config{Hosts: c.Hosts, Keyspace: c.Keyspace}
	_, err := cassandra.Migrate(ctx, cfg)
	require.NoError(t, err)
	st, err := cassandra.Open(ctx, cfg)
	require.NoError(t, err)
	defer st.Close()
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
	defer producer.Close()
	_, err = topics.Ensure(ctx, kadm.NewClient(producer), specs, -1)
	require.NoError(t, err)
	enq, err := enqueue.New(enqueue.Config{Store: st, Client: producer, Topics: names, Shards: shards})
	require.NoError(t, err)

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
	_, err = st.DeleteJob(ctx, "ops.deleted", 8, time.Now())
	require.NoError(t, err)

	events := newEventReader(t, k.Brokers, names.Events())
	reg := prometheus.NewRegistry()
	consumer, err := trigger.New(trigger.Config{
		Brokers: k.Brokers, Topics: names, Store: st, Enqueuer: enq, Registerer: reg,
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
