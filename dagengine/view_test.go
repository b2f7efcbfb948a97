package dagengine_test

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/dagengine"
	"github.com/sundialhq/sundial/dagengine/dag"
	"github.com/sundialhq/sundial/dagengine/dagrun"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// spaces collapses runs of blanks, so the assertions do not depend on the
// column widths.
var spaces = regexp.MustCompile(` +`)

func TestWriteRunAndRuns(t *testing.T) {
	t.Parallel()
	m := memStack(t)
	m.put(t, &sundialv1.DagSpec{Id: "t.d", OwnerTeam: "t", Nodes: []*sundialv1.DagNode{node("a"), node("b", "a"), node("c", "a")}}, true)
	r, _ := m.runs(t, nil)
	id, _, err := r.StartRun(t.Context(), "t.d", m.clock.Now(), dagengine.OriginTrigger)
	require.NoError(t, err)
	_, st, err := r.Get(t.Context(), id)
	require.NoError(t, err)
	_, err = r.Apply(t.Context(), id, succeeded(st, id, 0)...)
	require.NoError(t, err)
	_, err = r.Apply(t.Context(), id, dagrun.RunEvent{RunID: id + "/b", Node: "b", Attempt: 3, State: sundialv1.RunState_RUN_STATE_DEAD})
	require.NoError(t, err)

	row, st, err := r.Get(t.Context(), id)
	require.NoError(t, err)
	var b bytes.Buffer
	require.NoError(t, dagengine.WriteRun(&b, row, st, dag.Options{}))
	out := spaces.ReplaceAllString(b.String(), " ")
	assert.Contains(t, out, "DAG run "+id+"\n")
	assert.Contains(t, out, "Status running\n")
	assert.Contains(t, out, "Nodes 1/3 succeeded, 1 running, 1 failed\n")
	assert.Contains(t, out, "NODE STATE JOB AFTER RUN ID ATTEMPT STARTED ENDED REASON\n")
	assert.Contains(t, out, "\na succeeded job.a - "+id+"/a 1 ")
	assert.Contains(t, out, "\nb failed job.b a "+id+"/b 3 ")
	assert.True(t, strings.HasSuffix(out, " run_dead\nc running job.c a "+id+"/c - 2031-03-04T05:06:07.000Z - -\n"), out)

	runs, err := m.store.ListDagRuns(t.Context(), "t.d", 10)
	require.NoError(t, err)
	b.Reset()
	require.NoError(t, dagengine.WriteRuns(&b, runs))
	out = spaces.ReplaceAllString(b.String(), " ")
	assert.Equal(t, "DAG RUN DUE STATUS ORIGIN NODES UPDATED\n"+
		id+" 2031-03-04T05:06:07.000Z running trigger 1/3 succeeded, 1 running, 1 failed 2031-03-04T05:06:07.000Z\n", out)
}
