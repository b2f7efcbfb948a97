package loadgen

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
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

		c, err := client.New(client.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(race.Brokers()...)}, Topics: names})
		require.NoError(t, err)
		defer c.Close()
		plan, err := NewPlan(Workload{Prefix: "lg", Jobs: 1, Rate: 1, Duration: time.Minute, Mix: Mix{Interval: 1}, Target: Target{Handler: "noop"}})
		require.NoError(t, err)
		g, err := New(Config{Kafka: []kgo.Opt{kgo.SeedBrokers(race.Brokers()...)}, Topics: names, Plan: plan, Client: c,
			Recorder: NewRecorder(plan.ParseRunID, time.Now(), time.Now().Add(time.Minute)),
			Logger:   slog.New(slog.NewTextHandler(io.Discard, nil))})
		require.NoError(t, err)
		require.NoError(t, g.Start(t.Context()))
		defer g.Stop()

		race.Await(t, func() bool { return g.logAppend.Load()+g.createTime.Load() >= 1 })
	})
}

// countingHandler counts the log records at warning level and above.
type countingHandler struct{ warnings *atomic.Int64 }

func (h countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		h.warnings.Add(1)
	}
	return nil
}
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countingHandler) WithGroup(string) slog.Handler      { return h }

// TestObserverSkipsDagRunEvents: the DAG engine publishes DagRunEvents on
// sundial.events beside the runners' RunEvents; the observer must neither
// count one as a run event nor warn that it does not decode.
func TestObserverSkipsDagRunEvents(t *testing.T) {
	t.Parallel()
	names := topics.Names{}
	specs, err := names.Specs(4)
	require.NoError(t, err)
	opts := []kfake.Opt{kfake.NumBrokers(1)}
	for _, s := range specs {
		opts = append(opts, kfake.SeedTopics(s.Partitions, s.Name))
	}
	cluster, err := kfake.NewCluster(opts...)
	require.NoError(t, err)
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	c, err := client.New(client.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(brokers...)}, Topics: names})
	require.NoError(t, err)
	defer c.Close()
	plan, err := NewPlan(Workload{Prefix: "lg", Jobs: 1, Rate: 1, Duration: time.Minute, Mix: Mix{Interval: 1}, Target: Target{Handler: "noop"}})
	require.NoError(t, err)
	rec := NewRecorder(plan.ParseRunID, time.Now(), time.Now().Add(time.Minute))
	var warnings atomic.Int64
	g, err := New(Config{Kafka: []kgo.Opt{kgo.SeedBrokers(brokers...)}, Topics: names, Plan: plan, Client: c, Recorder: rec,
		Logger: slog.New(countingHandler{warnings: &warnings})})
	require.NoError(t, err)
	require.NoError(t, g.Start(ctx))
	defer g.Stop()

	dagEvent, err := sundialv1.EncodingProtobuf.Marshal(&sundialv1.DagRunEvent{DagRunId: "d@1", DagId: "d", NodeId: "n0",
		State: sundialv1.DagState(1), RunId: "d@1/n0"})
	require.NoError(t, err)
	runEvent, err := sundialv1.EncodingProtobuf.Marshal(&sundialv1.RunEvent{RunId: "other@1", State: sundialv1.RunState_RUN_STATE_SUCCEEDED})
	require.NoError(t, err)
	pb := kgo.RecordHeader{Key: sundialv1.HeaderContentType, Value: []byte(sundialv1.ContentTypeProtobuf)}
	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer producer.Close()
	// Both on one partition, the DAG event first: once the run event is
	// counted, the DAG event has been read.
	require.NoError(t, producer.ProduceSync(ctx,
		&kgo.Record{Topic: names.Events(), Partition: 0, Value: dagEvent,
			Headers: []kgo.RecordHeader{pb, {Key: sundialv1.HeaderKind, Value: []byte(sundialv1.KindDagRunEvent)}}},
		&kgo.Record{Topic: names.Events(), Partition: 0, Value: runEvent, Headers: []kgo.RecordHeader{pb}},
	).FirstErr())
	require.Eventually(t, func() bool { return rec.Progress().Events >= 1 }, 30*time.Second, 10*time.Millisecond, "the run event was never read")
	require.Equal(t, int64(1), rec.Progress().Events, "the DAG event was read as a run event")
	require.Zero(t, warnings.Load(), "the DAG event was warned about")
}
