package history

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/cassandra"
)

// TestStartStopTwice stops a writer before it starts and twice in a row,
// and starts it again after a Stop, on Kafka and Cassandra: each run stores
// an event's record, and goleak (TestMain) finds no goroutine left behind.
func TestStartStopTwice(t *testing.T) {
	t.Parallel()
	st, names, cl, prefix := setupStack(t)
	ctx := t.Context()
	w, err := New(Config{Kafka: []kgo.Opt{kgo.SeedBrokers(cl.OptValue(kgo.SeedBrokers).([]string)...)}, Topics: names, History: st,
		Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	w.Stop() // before Start: nothing to stop
	for i := range 2 {
		require.NoError(t, w.Start(ctx), "start %d", i+1)
		require.Error(t, w.Start(ctx), "a second Start while running")
		jobID := fmt.Sprintf("%sjob-%d", prefix, i)
		ev := &sundialv1.RunEvent{
			RunId: store.RunID(jobID, due), JobId: jobID, Attempt: 1, State: sundialv1.RunState_RUN_STATE_STARTED,
			Time: timestamppb.New(t1), DueTime: timestamppb.New(due), AttemptDueTime: timestamppb.New(due),
		}
		produce(t, cl, names, ev)
		require.Eventually(t, func() bool {
			runs, err := st.ListRuns(ctx, jobID, 10)
			return err == nil && len(runs) == 1
		}, 2*time.Minute, 50*time.Millisecond, "run %d stored nothing", i+1)
		w.Stop()
		w.Stop()
	}
}

// An attempt that failed within the millisecond it started shows failed, on
// Cassandra: when its running state was stored before the failure arrived,
// and when the two events were produced back to back.
func TestFastFailureShowsFailed(t *testing.T) {
	t.Parallel()
	st, names, cl, prefix := setupStack(t)
	ctx := t.Context()
	w, err := New(Config{Kafka: []kgo.Opt{kgo.SeedBrokers(cl.OptValue(kgo.SeedBrokers).([]string)...)}, Topics: names, History: st,
		Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	defer w.Stop()
	handled := func() float64 {
		return testutil.ToFloat64(w.m.records.WithLabelValues(resultStored)) + testutil.ToFloat64(w.m.coalesced)
	}
	started := t1.Add(100 * time.Microsecond)
	for i, separate := range []bool{true, false} {
		jobID := fmt.Sprintf("%sfast-%d", prefix, i)
		mod := func(ev *sundialv1.RunEvent) { ev.JobId, ev.RunId = jobID, store.RunID(jobID, due) }
		before := handled()
		produce(t, cl, names, event(sundialv1.RunState_RUN_STATE_STARTED, 1, started, mod))
		if separate {
			require.Eventually(t, func() bool { return handled() == before+1 }, 2*time.Minute, 20*time.Millisecond)
		}
		produce(t, cl, names, event(sundialv1.RunState_RUN_STATE_FAILED, 1, started.Add(300*time.Microsecond), func(ev *sundialv1.RunEvent) {
			mod(ev)
			ev.Error = &sundialv1.RunError{Code: "connection_refused"}
		}))
		require.Eventually(t, func() bool { return handled() == before+2 }, 2*time.Minute, 20*time.Millisecond)
		runs, err := st.ListRuns(ctx, jobID, 10)
		require.NoError(t, err)
		require.Len(t, runs, 1)
		assert.Equal(t, store.StateFailed, runs[0].State, "separate polls: %v", separate)
		assert.Equal(t, "connection_refused", runs[0].Error, "separate polls: %v", separate)
	}
}

// setupStack opens the real Cassandra store in a keyspace of its own and a
// Kafka client, with the events topic created under a prefix of its own.
func setupStack(t *testing.T) (*cassandra.Store, topics.Names, *kgo.Client, string) {
	t.Helper()
	k := testenv.NeedKafka(t)
	c := testenv.NeedCassandra(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cfg := cassandra.Config{Hosts: c.Hosts, Keyspace: c.Keyspace}
	_, err := cassandra.Migrate(ctx, cfg)
	require.NoError(t, err)
	st, err := cassandra.Open(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })

	names := topics.Names{Prefix: k.TopicPrefix}
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	specs, err := names.Specs(1)
	require.NoError(t, err)
	for _, s := range specs {
		if s.Name == names.Events() {
			_, err = topics.Ensure(ctx, kadm.NewClient(cl), []topics.Spec{s}, -1)
			require.NoError(t, err)
		}
	}
	return st, names, cl, k.TopicPrefix
}

func produce(t *testing.T, cl *kgo.Client, names topics.Names, ev *sundialv1.RunEvent) {
	t.Helper()
	val, err := proto.Marshal(ev)
	require.NoError(t, err)
	require.NoError(t, cl.ProduceSync(t.Context(), &kgo.Record{Topic: names.Events(), Key: []byte(ev.GetJobId()), Value: val,
		Headers: []kgo.RecordHeader{{Key: sundialv1.HeaderKind, Value: []byte(sundialv1.KindRunEvent)}}}).FirstErr())
}
