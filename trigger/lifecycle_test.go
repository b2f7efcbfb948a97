package trigger_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/internal/testenv"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
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
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const shards = 4
	b := newTriggerStack(ctx, t, k, shards)
	st, names, producer, enq := b.store, b.names, b.producer, b.enq
	events := newEventReader(t, k.Brokers, names.Events())

	consumer, err := trigger.New(trigger.Config{
		Kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, Topics: names, Store: st, Enqueuer: enq, Registerer: prometheus.NewRegistry(),
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
