package loadgen

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/client"
	"github.com/sundialhq/sundial/internal/startoffsets/startoffsetstest"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// TestObserverReadsARunWrittenWhileItFindsItsStart: a run record appended
// to a quiet partition of a run topic right after the broker answered the
// observer's lookup by time, and before the partition's end is looked up,
// must still be observed. kgo's AfterMilli offset, finding nothing by time,
// starts at the end looked up after the record was appended, and the
// workload's early runs would count as lost.
func TestObserverReadsARunWrittenWhileItFindsItsStart(t *testing.T) {
	t.Parallel()
	startoffsetstest.Rounds(t, 5, func(t *testing.T) {
		names := topics.Names{}
		// The writer is the dispatcher's producer.
		race := startoffsetstest.Start(t, startoffsetstest.SundialTopics(t, names, 4),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
		value, err := sundialv1.EncodingProtobuf.Marshal(&sundialv1.Run{RunId: "other@1"})
		require.NoError(t, err)
		race.Arm(&kgo.Record{Topic: names.AllRuns()[1], Partition: 0, Value: value,
			Headers: []kgo.RecordHeader{{Key: sundialv1.HeaderContentType, Value: []byte(sundialv1.ContentTypeProtobuf)}}})

		c, err := client.New(client.Config{Brokers: race.Brokers(), Topics: names})
		require.NoError(t, err)
		defer c.Close()
		plan, err := NewPlan(Workload{Prefix: "lg", Jobs: 1, Rate: 1, Duration: time.Minute, Mix: Mix{Interval: 1}, Target: Target{Handler: "noop"}})
		require.NoError(t, err)
		g, err := New(Config{Brokers: race.Brokers(), Topics: names, Plan: plan, Client: c,
			Recorder: NewRecorder(plan.ParseRunID, time.Now(), time.Now().Add(time.Minute)),
			Logger:   slog.New(slog.NewTextHandler(io.Discard, nil))})
		require.NoError(t, err)
		require.NoError(t, g.Start(t.Context()))
		defer g.Stop()

		race.Await(t, func() bool { return g.logAppend.Load()+g.createTime.Load() >= 1 })
	})
}
