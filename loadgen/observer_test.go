package loadgen

import (
	"context"
	"io"
	"log/slog"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sundialhq/sundial/client"
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
	const rounds = 5
	for round := range rounds {
		if !runWrittenDuringLookup(t) {
			t.Fatalf("round %d of %d: the run written while the observer looked up its start offsets was never read", round+1, rounds)
		}
	}
}

// runWrittenDuringLookup runs the scenario once on a new cluster and reports
// whether the observer read the run record.
func runWrittenDuringLookup(t *testing.T) bool {
	t.Helper()
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

	topic := names.AllRuns()[1]
	value, err := sundialv1.EncodingProtobuf.Marshal(&sundialv1.Run{RunId: "other@1"})
	require.NoError(t, err)
	run := &kgo.Record{Topic: topic, Partition: 0, Value: value,
		Headers: []kgo.RecordHeader{{Key: sundialv1.HeaderContentType, Value: []byte(sundialv1.ContentTypeProtobuf)}}}

	// The dispatcher's producer, on connections of its own.
	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	require.NoError(t, err)
	defer producer.Close()
	details, err := kadm.NewClient(producer).ListTopics(ctx, topic)
	require.NoError(t, err)
	topicID := details[topic].ID // fetches may name topics by id

	// After the broker answers the first lookup by time on the run topic
	// (nothing there: it is empty), the next request it handles waits
	// until the run is written.
	var (
		armedBy           atomic.Pointer[kmsg.ListOffsetsRequest]
		written, produced atomic.Bool
		runOffset         atomic.Int64
		// minFetch is the lowest offset fetched of the partition, whenever:
		// once it is past the run, nothing brings it back.
		minFetch atomic.Int64
	)
	minFetch.Store(math.MaxInt64)
	cluster.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		list := req.(*kmsg.ListOffsetsRequest)
		for _, tp := range list.Topics {
			for _, p := range tp.Partitions {
				if tp.Topic == topic && p.Timestamp >= 0 && !written.Load() {
					armedBy.CompareAndSwap(nil, list)
				}
			}
		}
		return nil, nil, false // the cluster answers
	})
	cluster.Control(func(r kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		// Not the lookup itself (its controls run before the broker
		// answers it): the request the broker handles after it.
		if by := armedBy.Load(); by != nil && kmsg.Request(by) != r && written.CompareAndSwap(false, true) {
			cluster.SleepControl(func() {
				if err := producer.ProduceSync(ctx, run).FirstErr(); err != nil {
					t.Errorf("produce the run: %v", err)
					return
				}
				runOffset.Store(run.Offset)
				produced.Store(true)
			})
		}
		return nil, nil, false
	})
	cluster.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		for _, tp := range req.(*kmsg.FetchRequest).Topics {
			for _, p := range tp.Partitions {
				if (tp.Topic == topic || tp.TopicID == topicID) && p.Partition == 0 {
					lowerTo(&minFetch, p.FetchOffset)
				}
			}
		}
		return nil, nil, false
	})

	c, err := client.New(client.Config{Brokers: brokers, Topics: names})
	require.NoError(t, err)
	defer c.Close()
	plan, err := NewPlan(Workload{Prefix: "lg", Jobs: 1, Rate: 1, Duration: time.Minute, Mix: Mix{Interval: 1}, Target: Target{Handler: "noop"}})
	require.NoError(t, err)
	g, err := New(Config{Brokers: brokers, Topics: names, Plan: plan, Client: c,
		Recorder: NewRecorder(plan.ParseRunID, time.Now(), time.Now().Add(time.Minute)),
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	require.NoError(t, g.Start(ctx))
	defer g.Stop()

	require.Eventually(t, produced.Load, 30*time.Second, 10*time.Millisecond, "the run was never written: no lookup by time")
	read := func() bool { return g.logAppend.Load()+g.createTime.Load() >= 1 }
	skipped := func() bool { m := minFetch.Load(); return m != math.MaxInt64 && m > runOffset.Load() }
	require.Eventually(t, func() bool { return read() || skipped() }, 30*time.Second, 10*time.Millisecond,
		"the observer neither read the run nor fetched past it")
	if read() {
		return true
	}
	t.Logf("the observer started %s[0] at offset %d, past the run at %d", topic, minFetch.Load(), runOffset.Load())
	return false
}

// lowerTo lowers v to o if o is lower.
func lowerTo(v *atomic.Int64, o int64) {
	for {
		cur := v.Load()
		if o >= cur || v.CompareAndSwap(cur, o) {
			return
		}
	}
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

	c, err := client.New(client.Config{Brokers: brokers, Topics: names})
	require.NoError(t, err)
	defer c.Close()
	plan, err := NewPlan(Workload{Prefix: "lg", Jobs: 1, Rate: 1, Duration: time.Minute, Mix: Mix{Interval: 1}, Target: Target{Handler: "noop"}})
	require.NoError(t, err)
	rec := NewRecorder(plan.ParseRunID, time.Now(), time.Now().Add(time.Minute))
	var warnings atomic.Int64
	g, err := New(Config{Brokers: brokers, Topics: names, Plan: plan, Client: c, Recorder: rec,
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
