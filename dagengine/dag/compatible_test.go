package dag_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/dagengine/dag"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

func TestCompatible(t *testing.T) {
	t.Parallel()
	inline := func(id, handler string, parents ...string) *sundialv1.DagNode {
		return &sundialv1.DagNode{Id: id, Parents: parents, Job: &sundialv1.DagNode_Inline{Inline: &sundialv1.JobSpec{
			Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: handler}}}}}}
	}
	old := spec(inline("extract", "v1"), inline("load", "v1", "extract"), node("report", "load"))
	cases := []struct {
		name string
		cur  *sundialv1.DagSpec
		errs []string // empty: compatible
	}{
		{"the same", spec(inline("extract", "v1"), inline("load", "v1", "extract"), node("report", "load")), nil},
		{"an inline job fixed", spec(inline("extract", "v1"), inline("load", "v2", "extract"), node("report", "load")), nil},
		{"nodes listed in another order", spec(node("report", "load"), inline("extract", "v1"), inline("load", "v1", "extract")), nil},
		{"failure policy changed", func() *sundialv1.DagSpec {
			s := spec(inline("extract", "v1"), inline("load", "v1", "extract"), node("report", "load"))
			s.FailurePolicy = sundialv1.DagFailurePolicy_DAG_FAILURE_POLICY_CONTINUE_INDEPENDENT
			return s
		}(), nil},
		{"a node removed", spec(inline("extract", "v1"), inline("load", "v1", "extract")), []string{`node "report": removed`}},
		{"a node added", spec(inline("extract", "v1"), inline("load", "v1", "extract"), node("report", "load"), node("audit", "load")), []string{`node "audit": added`}},
		{"a dependency changed", spec(inline("extract", "v1"), inline("load", "v1", "extract"), node("report", "extract")), []string{`node "report": depends on ["extract"] now, on ["load"]`}},
		{"another job", spec(inline("extract", "v1"), inline("load", "v1", "extract"), &sundialv1.DagNode{Id: "report", Parents: []string{"load"}, Job: &sundialv1.DagNode_JobId{JobId: "job.other"}}),
			[]string{`node "report": runs job "job.other" now, "job.report"`}},
		{"every difference at once", spec(inline("extract", "v1"), node("audit", "extract")), []string{`node "load": removed`, `node "report": removed`, `node "audit": added`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g1, errs := dag.Compile(old, dag.Options{})
			require.Empty(t, errs, fields(errs))
			g2, errs := dag.Compile(c.cur, dag.Options{})
			require.Empty(t, errs, fields(errs))
			err := dag.Compatible(g1, g2)
			if len(c.errs) == 0 {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, dag.ErrIncompatible)
			for _, want := range c.errs {
				assert.ErrorContains(t, err, want)
			}
		})
	}
}
