package operator_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/internal/startoffsets/startoffsetstest"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/operator"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// TestWaitRunReadsAnEventWrittenWhileItFindsItsStart: a run's terminal
// event appended to a quiet partition of sundial.events right after the
// broker answered the follower's lookup by time, and before the
// partition's end is looked up, must still be read. With kgo's AfterMilli
// offset the follower started at the end looked up after the event, and a
// cancel of a run that ended at once (its STARTED and CANCELLED milliseconds
// apart) waited for ever (TestOnRealStack/CancelRunningRun, seen in CI).
func TestWaitRunReadsAnEventWrittenWhileItFindsItsStart(t *testing.T) {
	t.Parallel()
	startoffsetstest.Rounds(t, 5, func(t *testing.T) {
		names := topics.Names{}
		// The writer is a runner's producer.
		race := startoffsetstest.Start(t, startoffsetstest.SundialTopics(t, names, 4),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
		ev := &sundialv1.RunEvent{RunId: "ops.x@1", JobId: "ops.x", Attempt: 1,
			State: sundialv1.RunState_RUN_STATE_CANCELLED, Reason: "cancelled", Time: timestamppb.Now()}
		value, err := proto.Marshal(ev)
		require.NoError(t, err)
		race.Arm(&kgo.Record{Topic: names.Events(), Partition: 0, Key: []byte(ev.GetJobId()), Value: value, Headers: topics.EventHeaders(ev)})

		op := operator.New(operator.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(race.Brokers()...)}, Topics: names})
		// WaitRun blocks until it reads the event: it is stopped as soon as
		// it fetches the event's partition from past the event.
		ctx, stop := race.UntilSkipped(t.Context())
		defer stop()
		got, err := op.WaitRun(ctx, ev.GetRunId(), time.Now())
		require.True(t, race.Written(), "the event was never written: the follower made no lookup by time (wait: %v)", err)
		require.NoError(t, err, "the event written while the follower looked up its start offsets was never read: %s", race)
		assert.Equal(t, sundialv1.RunState_RUN_STATE_CANCELLED, got.GetState())
	})
}
