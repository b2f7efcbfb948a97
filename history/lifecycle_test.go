package history

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
	k := testenv.NeedKafka(t)
	c := testenv.NeedCassandra(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cfg := cassandra.Config{Hosts: c.Hosts, Keyspace: c.Keyspace}
	_, err := cassandra.Migrate(ctx, cfg)
	require.NoError(t, err)
	st, err := cassandra.Open(ctx, cfg)
	require.NoError(t, err)
	defer st.Close()

	names := topics.Names{Prefix: k.TopicPrefix}
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...))
	require.NoError(t, err)
	defer cl.Close()
	specs, err := names.Specs(1)
	require.NoError(t, err)
	for _, s := range specs {
		if s.Name == names.Events() {
			_, err = topics.Ensure(ctx, kadm.NewClient(cl), []topics.Spec{s}, -1)
			require.NoError(t, err)
		}
	}

	w, err := New(Config{Kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, Topics: names, History: st,
		Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	w.Stop() // before Start: nothing to stop
	for i := range 2 {
		require.NoError(t, w.Start(ctx), "start %d", i+1)
		require.Error(t, w.Start(ctx), "a second Start while running")
		jobID := fmt.Sprintf("%sjob-%d", k.TopicPrefix, i)
		ev := &sundialv1.RunEvent{
			RunId: store.RunID(jobID, due), JobId: jobID, Attempt: 1, State: sundialv1.RunState_RUN_STATE_STARTED,
			Time: timestamppb.New(t1), DueTime: timestamppb.New(due), AttemptDueTime: timestamppb.New(due),
		}
		val, err := proto.Marshal(ev)
		require.NoError(t, err)
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: names.Events(), Key: []byte(jobID), Value: val,
			Headers: []kgo.RecordHeader{{Key: sundialv1.HeaderKind, Value: []byte(sundialv1.KindRunEvent)}}}).FirstErr())
		require.Eventually(t, func() bool {
			runs, err := st.ListRuns(ctx, jobID, 10)
			return err == nil && len(runs) == 1
		}, 2*time.Minute, 50*time.Millisecond, "run %d stored nothing", i+1)
		w.Stop()
		w.Stop()
	}
}
