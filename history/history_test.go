package history

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/sundialhq/sundial/internal/testenv"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testenv.GocqlSchemaAgreement()) }

var (
	due = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	t1  = due.Add(10 * time.Millisecond)
)

func event(state sundialv1.RunState, attempt uint32, at time.Time, mod func(*sundialv1.RunEvent)) *sundialv1.RunEvent {
	ev := &sundialv1.RunEvent{
		RunId: store.RunID("job", due), JobId: "job", Attempt: attempt, State: state,
		Time: timestamppb.New(at), DueTime: timestamppb.New(due), AttemptDueTime: timestamppb.New(due),
	}
	if mod != nil {
		mod(ev)
	}
	return ev
}

func TestRecords(t *testing.T) {
	t.Parallel()
	runID := store.RunID("job", due)
	base := store.RunRecord{JobID: "job", RunID: runID, Attempt: 1, Due: due, AttemptDue: due, UpdatedAt: t1}
	with := func(mod func(*store.RunRecord)) store.RunRecord { r := base; mod(&r); return r }
	next := due.Add(time.Second)
	tests := []struct {
		name string
		ev   *sundialv1.RunEvent
		want []store.RunRecord
	}{
		{"enqueued", event(sundialv1.RunState_RUN_STATE_ENQUEUED, 1, t1, nil),
			[]store.RunRecord{with(func(r *store.RunRecord) { r.State = store.StateScheduled; r.Dispatched = t1 })}},
		{"started with its timeline and wait", event(sundialv1.RunState_RUN_STATE_STARTED, 1, t1, func(ev *sundialv1.RunEvent) {
			ev.OwnerTeam, ev.WaitReason = "team-a", "no_executor"
			ev.DispatchedTime = timestamppb.New(due)
			ev.ReceivedTime = timestamppb.New(due.Add(20 * time.Second))
			ev.LeasedTime = timestamppb.New(due.Add(21 * time.Second))
		}), []store.RunRecord{with(func(r *store.RunRecord) {
			r.State, r.Started, r.OwnerTeam, r.WaitReason = store.StateRunning, t1, "team-a", "no_executor"
			r.Dispatched, r.Received, r.Leased = due, due.Add(20*time.Second), due.Add(21*time.Second)
		})}},
		{"started", event(sundialv1.RunState_RUN_STATE_STARTED, 1, t1, nil),
			[]store.RunRecord{with(func(r *store.RunRecord) { r.State = store.StateRunning; r.Started = t1 })}},
		{"succeeded", event(sundialv1.RunState_RUN_STATE_SUCCEEDED, 1, t1, func(ev *sundialv1.RunEvent) { ev.Duration = durationpb.New(4 * time.Millisecond) }),
			[]store.RunRecord{with(func(r *store.RunRecord) {
				r.State = store.StateSucceeded
				r.Started, r.Finished, r.Duration = t1.Add(-4*time.Millisecond), t1, 4*time.Millisecond
			})}},
		{"succeeded carrying its start (its STARTED not produced)", event(sundialv1.RunState_RUN_STATE_SUCCEEDED, 1, t1, func(ev *sundialv1.RunEvent) {
			ev.Duration = durationpb.New(4 * time.Millisecond)
			ev.StartedTime = timestamppb.New(t1.Add(-5 * time.Millisecond))
			ev.LeasedTime = timestamppb.New(t1.Add(-6 * time.Millisecond))
		}), []store.RunRecord{with(func(r *store.RunRecord) {
			r.State = store.StateSucceeded
			r.Leased, r.Started, r.Finished, r.Duration = t1.Add(-6*time.Millisecond), t1.Add(-5*time.Millisecond), t1, 4*time.Millisecond
		})}},
		{"timed out", event(sundialv1.RunState_RUN_STATE_TIMED_OUT, 1, t1, func(ev *sundialv1.RunEvent) {
			ev.Error = &sundialv1.RunError{Code: "timeout", Message: "too slow"}
		}), []store.RunRecord{with(func(r *store.RunRecord) { r.State = store.StateFailed; r.Finished = t1; r.Error = "timeout: too slow" })}},
		{"retrying schedules the next attempt", event(sundialv1.RunState_RUN_STATE_RETRYING, 1, t1, func(ev *sundialv1.RunEvent) {
			ev.NextAttemptDueTime = timestamppb.New(next)
		}), []store.RunRecord{with(func(r *store.RunRecord) { r.Attempt = 2; r.State = store.StateScheduled; r.AttemptDue = next })}},
		{"deferred", event(sundialv1.RunState_RUN_STATE_DEFERRED, 1, t1, func(ev *sundialv1.RunEvent) {
			ev.NextAttemptDueTime = timestamppb.New(next)
			ev.Reason = "circuit_open"
		}), []store.RunRecord{with(func(r *store.RunRecord) {
			r.State = store.StateScheduled
			r.AttemptDue = next
			r.Error = "deferred: circuit_open"
		})}},
		{"dead", event(sundialv1.RunState_RUN_STATE_DEAD, 3, t1, func(ev *sundialv1.RunEvent) {
			ev.Error = &sundialv1.RunError{Code: "http_404"}
		}), []store.RunRecord{with(func(r *store.RunRecord) {
			r.Attempt = 3
			r.State = store.StateFailed
			r.Finished = t1
			r.Error = "dead: http_404"
		})}},
		{"skipped", event(sundialv1.RunState_RUN_STATE_SKIPPED, 1, t1, func(ev *sundialv1.RunEvent) { ev.Reason = "overlap_forbid" }),
			[]store.RunRecord{with(func(r *store.RunRecord) { r.State = store.StateSkipped; r.Error = "overlap_forbid" })}},
		{"cancelled", event(sundialv1.RunState_RUN_STATE_CANCELLED, 1, t1, func(ev *sundialv1.RunEvent) { ev.Reason = "replaced" }),
			[]store.RunRecord{with(func(r *store.RunRecord) { r.State = store.StateCancelled; r.Finished = t1; r.Error = "replaced" })}},
		{"suspended is neither running nor finished", event(sundialv1.RunState_RUN_STATE_SUSPENDED, 1, t1, func(ev *sundialv1.RunEvent) { ev.Reason = "suspended" }),
			[]store.RunRecord{with(func(r *store.RunRecord) { r.State = store.StateSuspended; r.Error = "suspended" })}},
		{"failed keeps the attempt's log lines", event(sundialv1.RunState_RUN_STATE_FAILED, 1, t1, func(ev *sundialv1.RunEvent) {
			ev.Error = &sundialv1.RunError{Code: "exec_exit", Message: "report: exit status 3"}
			ev.Log = []string{"about to fail"}
		}), []store.RunRecord{with(func(r *store.RunRecord) {
			r.State = store.StateFailed
			r.Finished = t1
			r.Error = "exec_exit: report: exit status 3"
			r.Log = []string{"about to fail"}
		})}},
		{"unspecified writes nothing", event(sundialv1.RunState_RUN_STATE_UNSPECIFIED, 1, t1, nil), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Records(tt.ev)
			assert.Equal(t, tt.want, got)
			for _, r := range got {
				assert.NoError(t, r.Validate())
			}
		})
	}
}

func TestWriterStoresHistory(t *testing.T) {
	t.Parallel()
	names, brokers, cl := fakeEvents(t, 2)
	st, err := memory.New(memory.Options{})
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	w, err := New(Config{Kafka: []kgo.Opt{kgo.SeedBrokers(brokers...)}, Topics: names, History: st, Registerer: reg})
	require.NoError(t, err)
	require.NoError(t, w.Start(context.Background()))
	defer w.Stop()
	at := func(ms int) time.Time { return due.Add(time.Duration(ms) * time.Millisecond) }
	evs := []*sundialv1.RunEvent{
		event(sundialv1.RunState_RUN_STATE_STARTED, 1, at(1), nil),
		event(sundialv1.RunState_RUN_STATE_FAILED, 1, at(5), func(ev *sundialv1.RunEvent) {
			ev.Error = &sundialv1.RunError{Code: "http_503"}
			ev.Duration = durationpb.New(4 * time.Millisecond)
		}),
		event(sundialv1.RunState_RUN_STATE_RETRYING, 1, at(6), func(ev *sundialv1.RunEvent) { ev.NextAttemptDueTime = timestamppb.New(at(100)) }),
		event(sundialv1.RunState_RUN_STATE_STARTED, 2, at(101), nil),
		event(sundialv1.RunState_RUN_STATE_SUCCEEDED, 2, at(103), func(ev *sundialv1.RunEvent) { ev.Duration = durationpb.New(2 * time.Millisecond) }),
		// A replayed older event must not move attempt 2 back.
		event(sundialv1.RunState_RUN_STATE_STARTED, 2, at(101), nil),
	}
	// A run event that does not decode, ahead of the others in their
	// partition, is skipped and counted; the events behind it are stored.
	require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Topic: names.Events(), Key: []byte("job"), Value: []byte{0xff, 0xff},
		Headers: []kgo.RecordHeader{{Key: sundialv1.HeaderKind, Value: []byte(sundialv1.KindRunEvent)}}}).FirstErr())
	for _, ev := range evs {
		produceEvent(t, cl, names, ev)
	}
	// An event of another kind on the same topic is ignored.
	require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Topic: names.Events(), Key: []byte("dag"), Value: []byte("x"),
		Headers: []kgo.RecordHeader{{Key: sundialv1.HeaderKind, Value: []byte(sundialv1.KindDagRunEvent)}}}).FirstErr())

	// Every event maps to one record, the replayed one included (the store
	// keeps the newest); the records of one attempt that came in one poll
	// are written as one.
	stored := func() float64 { return testutil.ToFloat64(w.m.records.WithLabelValues(resultStored)) }
	require.Eventually(t, func() bool {
		return stored()+testutil.ToFloat64(w.m.coalesced) == float64(len(evs)) &&
			testutil.ToFloat64(w.m.events.WithLabelValues(eventMalformed)) == 1
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, float64(len(evs)), testutil.ToFloat64(w.m.events.WithLabelValues(eventDecoded)))
	assert.Zero(t, testutil.ToFloat64(w.m.records.WithLabelValues(resultRefused)))
	assert.Zero(t, testutil.ToFloat64(w.m.retries))
	assert.Equal(t, uint64(stored()), histogramCount(t, reg, "sundial_history_lag_seconds"))
	// Caught up: nothing is behind.
	assert.Zero(t, gaugeValue(t, reg, "sundial_history_consumer_lag_records"))
	assert.Zero(t, gaugeValue(t, reg, "sundial_history_consumer_lag_seconds"))
	lint, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, lint)

	require.Eventually(t, func() bool {
		runs, err := st.ListRuns(context.Background(), "job", 10)
		return err == nil && len(runs) == 2 && runs[0].State == store.StateSucceeded
	}, 10*time.Second, 10*time.Millisecond)
	runs, err := st.ListRuns(context.Background(), "job", 10)
	require.NoError(t, err)
	assert.Equal(t, 2, runs[0].Attempt)
	assert.Equal(t, 2*time.Millisecond, runs[0].Duration)
	assert.Equal(t, store.StateFailed, runs[1].State)
	assert.Equal(t, "http_503", runs[1].Error)
	sum, err := st.JobSummary(context.Background(), "job")
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Runs)
	assert.Equal(t, 2, sum.Attempts)
	assert.Equal(t, 1, sum.Failures)
	require.NotNil(t, sum.LastRun)
	assert.Equal(t, store.StateSucceeded, sum.LastRun.State)
}

// fakeEvents starts a fake Kafka cluster holding sundial.events in
// partitions partitions, and a client producing to it; both end with t.
func fakeEvents(t *testing.T, partitions int) (names topics.Names, brokers []string, cl *kgo.Client) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(partitions), names.Events()))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	cl, err = kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return names, c.ListenAddrs(), cl
}

// produceEvent produces ev, keyed by job, as the runner does.
func produceEvent(t *testing.T, cl *kgo.Client, names topics.Names, ev *sundialv1.RunEvent) {
	t.Helper()
	val, err := proto.Marshal(ev)
	require.NoError(t, err)
	require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Topic: names.Events(), Key: []byte("job"), Value: val,
		Headers: []kgo.RecordHeader{{Key: sundialv1.HeaderKind, Value: []byte(sundialv1.KindRunEvent)}}}).FirstErr())
}

// TestGatherSpansPolls: a run's STARTED, polled alone, waits in the
// writer's gather for its outcome, and the two are written as one row.
// The gather here ends when it holds MaxPollRecords (2) events, not by
// time: the test waits until the writer has fetched STARTED (one record
// fetched and not stored) before it produces SUCCEEDED.
func TestGatherSpansPolls(t *testing.T) {
	t.Parallel()
	names, brokers, cl := fakeEvents(t, 1)
	st, err := memory.New(memory.Options{})
	require.NoError(t, err)
	h := &countingHistory{History: st}
	reg := prometheus.NewPedanticRegistry()
	w, err := New(Config{Kafka: []kgo.Opt{kgo.SeedBrokers(brokers...)}, Topics: names, History: h, Registerer: reg,
		MaxPollRecords: 2, Gather: time.Hour})
	require.NoError(t, err)
	require.NoError(t, w.Start(context.Background()))
	defer w.Stop()
	produce := func(ev *sundialv1.RunEvent) { produceEvent(t, cl, names, ev) }
	produce(event(sundialv1.RunState_RUN_STATE_STARTED, 1, due.Add(time.Millisecond), nil))
	require.Eventually(t, func() bool { return gaugeValue(t, reg, "sundial_history_consumer_lag_records") == 1 },
		time.Minute, 10*time.Millisecond, "the writer never fetched STARTED")
	produce(event(sundialv1.RunState_RUN_STATE_SUCCEEDED, 1, due.Add(3*time.Millisecond), func(ev *sundialv1.RunEvent) {
		ev.Duration = durationpb.New(2 * time.Millisecond)
	}))
	require.Eventually(t, func() bool { return gaugeValue(t, reg, "sundial_history_consumer_lag_records") == 0 },
		time.Minute, 10*time.Millisecond, "the writer never stored the run")

	assert.Equal(t, float64(1), testutil.ToFloat64(w.m.records.WithLabelValues(resultStored)), "one row for the attempt")
	assert.Equal(t, float64(1), testutil.ToFloat64(w.m.coalesced))
	h.mu.Lock()
	assert.Equal(t, 1, h.singles+h.batchedRecs, "one record reached the store")
	h.mu.Unlock()
	runs, err := st.ListRuns(context.Background(), "job", 10)
	require.NoError(t, err)
	require.Len(t, runs, 1)
	assert.Equal(t, store.StateSucceeded, runs[0].State)
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	err := Config{MaxPollRecords: -1}.Validate()
	require.Error(t, err)
	for _, f := range []string{"Kafka", "History", "MaxPollRecords"} {
		assert.Contains(t, err.Error(), f)
	}
}

func histogramCount(t *testing.T, g prometheus.Gatherer, name string) uint64 {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			require.Len(t, mf.GetMetric(), 1)
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatalf("%s not gathered", name)
	return 0
}

func gaugeValue(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			require.Len(t, mf.GetMetric(), 1)
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("%s not gathered", name)
	return 0
}

// Two writers cannot share a registry: the second's metrics collide, and
// New says so instead of panicking.
func TestMetricsRegistrationConflict(t *testing.T) {
	t.Parallel()
	st, err := memory.New(memory.Options{})
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	cfg := Config{Kafka: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, History: st, Registerer: reg}
	_, err = New(cfg)
	require.NoError(t, err)
	_, err = New(cfg)
	require.ErrorContains(t, err, "history: register metrics")
}
