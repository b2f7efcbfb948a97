package trigger_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/enqueue"
	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store/cassandra"
	"github.com/sundialhq/sundial/trigger"
)

// TestStartStopTwice stops a consumer before it starts and twice in a row,
// and starts it again after a Stop: each run answers a trigger, and goleak
// (TestMain) finds no goroutine left behind. (That a graceful Stop commits
// what was answered, so a restart does not answer it again, is
// consume's TestAnsweredPollCommittedWhenStopComes.)
func TestStartStopTwice(t *testing.T) {
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
	events := newEventReader(t, k.Brokers, names.Events())

	consumer, err := trigger.New(trigger.Config{
		Brokers: k.Brokers, Topics: names, Store: st, Enqueuer: enq, Registerer: prometheus.NewRegistry(),
		Logger: slog.New(slog.DiscardHandler), RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond,
	})
	require.NoError(t, err)
	consumer.Stop() // before Start: nothing to stop
	for i := range 2 {
		require.NoError(t, consumer.Start(t.Context()), "start %d", i+1)
		require.Error(t, consumer.Start(t.Context()), "a second Start while running")
		// A trigger of a job that does not exist is answered with a
		// refusal, which shows the run is processing.
		jobID := fmt.Sprintf("ops.missing-%d", i)
		rec := record(t, &sundialv1.Trigger{JobId: jobID, IdempotencyKey: "k", RequestedAt: timestamppb.Now()}, sundialv1.EncodingProtobuf)
		rec.Topic, rec.Timestamp = names.Triggers(), time.Time{} // let the producer stamp it
		require.NoError(t, producer.ProduceSync(ctx, rec).FirstErr())
		got := events.waitJob(t, jobID)
		require.Equal(t, trigger.ReasonJobDeleted, got.GetReason(), "run %d; error: %s", i+1, got.GetError().GetMessage())
		consumer.Stop()
		consumer.Stop()
	}
}
