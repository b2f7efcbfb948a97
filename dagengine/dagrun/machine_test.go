package dagrun_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/dagengine/dag"
	"github.com/sundialhq/sundial/dagengine/dagrun"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

func chain(t *testing.T, ids ...string) *dag.Graph {
	t.Helper()
	s := &sundialv1.DagSpec{Id: "t.d", OwnerTeam: "t"}
	for i, id := range ids {
		n := &sundialv1.DagNode{Id: id, Job: &sundialv1.DagNode_JobId{JobId: "j." + id}}
		if i > 0 {
			n.Parents = []string{ids[i-1]}
		}
		s.Nodes = append(s.Nodes, n)
	}
	g, errs := dag.Compile(s, dag.Options{})
	require.Empty(t, errs)
	return g
}

func TestRunIDs(t *testing.T) {
	t.Parallel()
	due := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	runID := dagrun.RunID("etl.daily", due)
	assert.Equal(t, "etl.daily@1924992000000", runID)
	assert.Equal(t, "etl.daily@1924992000000/load", dagrun.NodeRunID(runID, "load", 1))
	assert.Equal(t, "etl.daily@1924992000000/load#3", dagrun.NodeRunID(runID, "load", 3))
	assert.Empty(t, dagrun.Node{ID: "x"}.RunID(runID), "never started")
}

func TestApplyRefusesAStateOfAnotherGraph(t *testing.T) {
	t.Parallel()
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	res := dagrun.Start(chain(t, "a", "b"), "d@1", now, now)
	_, err := dagrun.Apply(chain(t, "a", "b", "c"), res.State, dagrun.Tick{}, now)
	require.ErrorContains(t, err, "state has 2 nodes, the DAG 3")
	_, err = dagrun.Apply(chain(t, "a", "x"), res.State, dagrun.Tick{}, now)
	require.ErrorContains(t, err, `state node 1 is "b", the DAG's "x"`)
}

func TestPublishedAcknowledgesTheEventsNamed(t *testing.T) {
	t.Parallel()
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	g := chain(t, "a", "b")
	res := dagrun.Start(g, "d@1", now, now)
	require.Len(t, res.State.Outbox, 2) // dag running, a running
	assert.True(t, res.State.Pending())

	res2, err := dagrun.Apply(g, res.State, dagrun.Published{Seqs: []uint64{1}}, now)
	require.NoError(t, err)
	require.Len(t, res2.State.Outbox, 1)
	assert.Equal(t, uint64(2), res2.State.Outbox[0].Seq)
	assert.Len(t, res.State.Outbox, 2, "the input state is untouched")

	res3, err := dagrun.Apply(g, res2.State, dagrun.Published{Seqs: []uint64{1}}, now)
	require.NoError(t, err)
	assert.False(t, res3.Changed)
	assert.Equal(t, "already_published", res3.Ignored)

	res4, err := dagrun.Apply(g, res2.State, dagrun.Enqueued{Node: "a", Gen: 1}, now)
	require.NoError(t, err)
	res4, err = dagrun.Apply(g, res4.State, dagrun.Published{Seqs: []uint64{2, 99}}, now)
	require.NoError(t, err)
	assert.False(t, res4.State.Pending())
}

func TestUnmarshalRejects(t *testing.T) {
	t.Parallel()
	for name, in := range map[string]string{
		"not json":      "{",
		"other version": `{"v":2,"run":"d@1","status":"running"}`,
		"bad status":    `{"v":1,"run":"d@1","status":"sleeping"}`,
		"bad phase":     `{"v":1,"run":"d@1","status":"running","nodes":[{"id":"a","p":"dozing"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := dagrun.Unmarshal([]byte(in))
			require.Error(t, err)
		})
	}
}

// TestResumable: a DAG run can be resumed when a node failed, was
// cancelled or timed out, and Failed names those nodes: the ones a Resume
// reruns, and what the API's resumable and the console's Resume show.
func TestResumable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		phases []dagrun.Phase
		failed []int
	}{
		{name: "all succeeded", phases: []dagrun.Phase{dagrun.Succeeded, dagrun.Succeeded}},
		{name: "running, waiting", phases: []dagrun.Phase{dagrun.Running, dagrun.Waiting}},
		{name: "failed, then skipped", phases: []dagrun.Phase{dagrun.Failed, dagrun.Skipped}, failed: []int{0}},
		{name: "cancelled and timed out", phases: []dagrun.Phase{dagrun.Succeeded, dagrun.Cancelled, dagrun.TimedOut}, failed: []int{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := dagrun.State{}
			for _, p := range tc.phases {
				st.Nodes = append(st.Nodes, dagrun.Node{Phase: p})
			}
			assert.Equal(t, tc.failed, st.Failed())
			assert.Equal(t, len(tc.failed) > 0, st.Resumable())
		})
	}
}
