package dagengine

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/dagengine/dagrun"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// current is a RunEvent record as today's writers produce it.
func current(t testing.TB, ev *sundialv1.RunEvent) *kgo.Record {
	t.Helper()
	value, headers, err := topics.EncodeEvent(sundialv1.EncodingProtobuf, ev)
	require.NoError(t, err)
	return &kgo.Record{Value: value, Headers: headers}
}

// legacy is a RunEvent record as writers before the DAG run header
// produced it: today's, without that header.
func legacy(t testing.TB, ev *sundialv1.RunEvent) *kgo.Record {
	t.Helper()
	rec := current(t, ev)
	rec.Headers = slices.DeleteFunc(rec.Headers, func(h kgo.RecordHeader) bool { return h.Key == sundialv1.HeaderDagRun })
	return rec
}

func nodeEvent(dagRun, node string, state sundialv1.RunState) *sundialv1.RunEvent {
	return &sundialv1.RunEvent{RunId: dagRun + "/" + node, JobId: "j-" + node, Attempt: 1, State: state, DagRunId: dagRun, DagNodeId: node}
}

// TestGroupEventsDuringAnUpgrade: records with the DAG run header and
// records written before it share the topic while writers are upgraded;
// every DAG node event is applied whichever it is, and a record marked as
// outside any DAG is passed by undecoded (a value that would not decode is
// not even reported).
func TestGroupEventsDuringAnUpgrade(t *testing.T) {
	t.Parallel()
	succeeded, started := sundialv1.RunState_RUN_STATE_SUCCEEDED, sundialv1.RunState_RUN_STATE_STARTED
	plain := &sundialv1.RunEvent{RunId: "job@1", JobId: "job", Attempt: 1, State: succeeded}
	undecodable := current(t, plain)
	undecodable.Value = []byte{0xff, 0xff, 0xff}
	dagRunEvent, dagRunHeaders, err := topics.EncodeEvent(sundialv1.EncodingProtobuf, &sundialv1.DagRunEvent{DagRunId: "d@1"})
	require.NoError(t, err)
	recs := []*kgo.Record{
		current(t, plain),
		legacy(t, plain),
		current(t, nodeEvent("d@1", "a", started)),
		legacy(t, nodeEvent("d@1", "a", succeeded)),
		current(t, nodeEvent("d@2", "b", sundialv1.RunState_RUN_STATE_ENQUEUED)),
		legacy(t, nodeEvent("d@2", "b", started)),
		undecodable,
		{Value: dagRunEvent, Headers: dagRunHeaders},
		current(t, nodeEvent("d@1", "c", succeeded)),
	}
	var bad int
	b := groupEvents(recs, func(*kgo.Record, error) { bad++ })
	assert.Equal(t, 0, bad, "a marked record outside any DAG is not decoded")
	assert.Equal(t, []string{"d@1", "d@2"}, b.order)
	assert.Equal(t, map[string][]dagrun.Input{
		"d@1": {
			dagrun.RunEvent{RunID: "d@1/a", Node: "a", Attempt: 1, State: started},
			dagrun.RunEvent{RunID: "d@1/a", Node: "a", Attempt: 1, State: succeeded},
			dagrun.RunEvent{RunID: "d@1/c", Node: "c", Attempt: 1, State: succeeded},
		},
		"d@2": {dagrun.RunEvent{RunID: "d@2/b", Node: "b", Attempt: 1, State: started}},
	}, b.groups)

	// A record written before the header that does not decode is reported,
	// as it always was.
	old := legacy(t, plain)
	old.Value = []byte{0xff, 0xff, 0xff}
	groupEvents([]*kgo.Record{old}, func(*kgo.Record, error) { bad++ })
	assert.Equal(t, 1, bad)
}

// BenchmarkGroupEvents measures the engine's cost per record of
// sundial.events on the mix the bench produces: one event of a DAG node per
// 1,000 events of other runs (STARTED and SUCCEEDED of runs outside any
// DAG, with the fields a runner sets). "current" records carry the DAG run
// header, "legacy" ones were written before it.
func BenchmarkGroupEvents(b *testing.B) {
	for _, kind := range []struct {
		name   string
		encode func(testing.TB, *sundialv1.RunEvent) *kgo.Record
	}{{"current", current}, {"legacy", legacy}} {
		b.Run(kind.name, func(b *testing.B) {
			const n = 1001
			recs := make([]*kgo.Record, 0, n)
			for i := range n - 1 {
				state := sundialv1.RunState_RUN_STATE_STARTED
				if i%2 == 1 {
					state = sundialv1.RunState_RUN_STATE_SUCCEEDED
				}
				job := fmt.Sprintf("loadgen.bench.job-%05d", i)
				ts := timestamppb.New(time.UnixMilli(1795960569293))
				recs = append(recs, kind.encode(b, &sundialv1.RunEvent{
					RunId: job + "@1795960569293", JobId: job, Attempt: 1, State: state, Time: ts, DueTime: ts,
					AttemptDueTime: ts, RunnerId: "bench-runner-0", Duration: durationpb.New(12 * time.Millisecond),
					OwnerTeam: "loadgen", FencingToken: 7, DispatchedTime: ts, ReceivedTime: ts, LeasedTime: ts,
					StartedTime: ts, TraceId: "4bf92f3577b34da6a3ce929d0e0e4736",
				}))
			}
			recs = append(recs, kind.encode(b, nodeEvent("loadgen.bench.dag-1@1795960569000", "n1", sundialv1.RunState_RUN_STATE_SUCCEEDED)))
			b.ReportAllocs()
			polls := 0
			for b.Loop() {
				batch := groupEvents(recs, func(_ *kgo.Record, err error) { b.Fatal(err) })
				if len(batch.order) != 1 {
					b.Fatalf("%d DAG runs, want 1", len(batch.order))
				}
				polls++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(polls*n), "ns/record")
		})
	}
}
