package apiserver

import (
	"testing"

	"github.com/stretchr/testify/assert"

	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// TestDagChanges: a plan's diff names each node added, removed or
// changed (with its fields, never its parents), each dependency added or
// removed, and the DAG's own fields apart from its nodes.
func TestDagChanges(t *testing.T) {
	t.Parallel()
	job := func(id string) *sundialv1.DagNode_JobId { return &sundialv1.DagNode_JobId{JobId: id} }
	base := func() *sundialv1.DagSpec {
		return &sundialv1.DagSpec{Id: "a.etl", OwnerTeam: "a", Description: "nightly", Nodes: []*sundialv1.DagNode{
			{Id: "extract", Job: job("a.extract")},
			{Id: "load", Job: job("a.load"), Parents: []string{"extract"}},
		}}
	}
	type want struct {
		fields []string
		nodes  []string // node:change
		edges  []string // parent>child:change
	}
	for _, tc := range []struct {
		name   string
		before *sundialv1.DagSpec
		edit   func(*sundialv1.DagSpec)
		want   want
	}{
		{name: "unchanged", before: base(), edit: func(*sundialv1.DagSpec) {}},
		{name: "created: every node and edge is added", edit: func(*sundialv1.DagSpec) {},
			want: want{fields: []string{"id", "owner_team", "description"}, nodes: []string{"extract:added", "load:added"}, edges: []string{"extract>load:added"}}},
		{name: "a node added after another", before: base(), edit: func(s *sundialv1.DagSpec) {
			s.Nodes = append(s.Nodes, &sundialv1.DagNode{Id: "report", Job: job("a.report"), Parents: []string{"load"}})
		}, want: want{nodes: []string{"report:added"}, edges: []string{"load>report:added"}}},
		{name: "a node removed takes its edges", before: base(), edit: func(s *sundialv1.DagSpec) {
			s.Nodes = s.Nodes[:1]
		}, want: want{nodes: []string{"load:removed"}, edges: []string{"extract>load:removed"}}},
		{name: "a node's job changed, and the description", before: base(), edit: func(s *sundialv1.DagSpec) {
			s.Nodes[1].Job = job("a.load2")
			s.Description = "hourly"
		}, want: want{fields: []string{"description"}, nodes: []string{"load:changed"}}},
		{name: "a dependency dropped is an edge, not a node change", before: base(), edit: func(s *sundialv1.DagSpec) {
			s.Nodes[1].Parents = nil
		}, want: want{edges: []string{"extract>load:removed"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			after := base()
			tc.edit(after)
			fields, nodes, edges := dagChanges(tc.before, after)
			assert.Equal(t, tc.want.fields, names(fields, func(c *apiv1.FieldChange) string { return c.GetField() }), "fields")
			assert.Equal(t, tc.want.nodes, names(nodes, func(c *apiv1.DagNodeChange) string { return c.GetNodeId() + ":" + c.GetChange() }), "nodes")
			assert.Equal(t, tc.want.edges, names(edges, func(c *apiv1.DagEdgeChange) string { return c.GetParent() + ">" + c.GetChild() + ":" + c.GetChange() }), "edges")
			for _, n := range nodes {
				for _, f := range n.GetFields() {
					assert.NotEqual(t, "parents", f.GetField(), "a node's parents are edges")
				}
			}
		})
	}
}

func names[T any](xs []T, name func(T) string) []string {
	var out []string
	for _, x := range xs {
		out = append(out, name(x))
	}
	return out
}
