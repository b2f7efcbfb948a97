package apiserver_test

import (
	"fmt"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/auth"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// twoNodeDag is a valid DAG of team: extract, then load.
func twoNodeDag(id, team string) *sundialv1.DagSpec {
	node := func(name string, parents ...string) *sundialv1.DagNode {
		return &sundialv1.DagNode{Id: name, Parents: parents, Job: &sundialv1.DagNode_Inline{Inline: &sundialv1.JobSpec{
			Target: &sundialv1.Target{Kind: &sundialv1.Target_Http{Http: &sundialv1.HttpTarget{Url: "http://127.0.0.1:1/" + name}}},
		}}}
	}
	return &sundialv1.DagSpec{
		Id: id, OwnerTeam: team, Labels: map[string]string{"kind": "etl"},
		Schedule: &sundialv1.Schedule{Kind: &sundialv1.Schedule_Cron{Cron: &sundialv1.Cron{Expression: "0 3 * * *"}}},
		Nodes:    []*sundialv1.DagNode{node("extract"), node("load", "extract")},
	}
}

func testDags(t *testing.T, e *env, owner, other string) {
	ctx := t.Context()
	id := owner + ".etl"
	admin, viewer := e.dags(token(owner, auth.RoleAdmin)), e.dags(token(owner, auth.RoleViewer))
	otherAdmin := e.dags(token(other, auth.RoleAdmin))

	_, err := viewer.ApplyDag(ctx, connect.NewRequest(&apiv1.ApplyDagRequest{Spec: twoNodeDag(id, owner)}))
	requireCode(t, connect.CodePermissionDenied, err, "viewer applies")
	res, err := admin.ApplyDag(ctx, connect.NewRequest(&apiv1.ApplyDagRequest{Spec: twoNodeDag(id, owner)}))
	require.NoError(t, err)
	require.True(t, res.Msg.GetAccepted(), "%v", res.Msg.GetStatus())
	assert.Equal(t, id, res.Msg.GetStatus().GetDagId())

	cyclic := twoNodeDag(owner+".cyclic", owner)
	cyclic.Nodes[0].Parents = []string{"load"}
	res, err = admin.ApplyDag(ctx, connect.NewRequest(&apiv1.ApplyDagRequest{Spec: cyclic}))
	require.NoError(t, err)
	assert.False(t, res.Msg.GetAccepted())
	assert.NotEmpty(t, res.Msg.GetStatus().GetErrors(), "a cycle names its fields")

	got, err := viewer.GetDag(ctx, connect.NewRequest(&apiv1.GetDagRequest{Id: id}))
	require.NoError(t, err)
	assert.Len(t, got.Msg.GetDag().GetSpec().GetNodes(), 2)
	assert.Equal(t, apiv1.ScheduleKind_SCHEDULE_KIND_CRON, got.Msg.GetDag().GetScheduleKind())
	_, err = otherAdmin.GetDag(ctx, connect.NewRequest(&apiv1.GetDagRequest{Id: id}))
	requireCode(t, connect.CodeNotFound, err, "other team gets")
	_, err = otherAdmin.ApplyDag(ctx, connect.NewRequest(&apiv1.ApplyDagRequest{Spec: twoNodeDag(id, other)}))
	requireCode(t, connect.CodeNotFound, err, "other team takes the id over")
	_, err = otherAdmin.DeleteDag(ctx, connect.NewRequest(&apiv1.DeleteDagRequest{Id: id}))
	requireCode(t, connect.CodeNotFound, err, "other team deletes")

	mine, err := viewer.ListDags(ctx, connect.NewRequest(&apiv1.ListDagsRequest{Filter: &apiv1.DefinitionFilter{Labels: map[string]string{"kind": "etl"}}}))
	require.NoError(t, err)
	require.Len(t, mine.Msg.GetDags(), 1)
	assert.Equal(t, id, mine.Msg.GetDags()[0].GetSpec().GetId())
	theirs, err := otherAdmin.ListDags(ctx, connect.NewRequest(&apiv1.ListDagsRequest{}))
	require.NoError(t, err)
	assert.Empty(t, theirs.Msg.GetDags(), "other team lists none of the owner's DAGs")

	del, err := admin.DeleteDag(ctx, connect.NewRequest(&apiv1.DeleteDagRequest{Id: id}))
	require.NoError(t, err)
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_DELETED, del.Msg.GetStatus().GetOutcome())
	_, err = viewer.GetDag(ctx, connect.NewRequest(&apiv1.GetDagRequest{Id: id}))
	requireCode(t, connect.CodeNotFound, err, "deleted")
}

// testTooLargeDagIsInvalidArgument protects callers from retrying what can
// never succeed (finding 14): a DAG of 10,000 nodes fits the API's request
// limit but not a Kafka record; the answer is invalid_argument naming the
// limit, never unavailable "try again".
func testTooLargeDagIsInvalidArgument(t *testing.T, e *env, owner, _ string) {
	spec := twoNodeDag(owner+".huge", owner)
	spec.Nodes = nil
	path := strings.Repeat("p", 200)
	for i := range 10_000 {
		spec.Nodes = append(spec.Nodes, &sundialv1.DagNode{Id: fmt.Sprintf("n%05d", i), Job: &sundialv1.DagNode_Inline{Inline: &sundialv1.JobSpec{
			Target: &sundialv1.Target{Kind: &sundialv1.Target_Http{Http: &sundialv1.HttpTarget{Url: "http://127.0.0.1:1/" + path}}},
		}}})
	}
	_, err := e.dags(token(owner, auth.RoleAdmin)).ApplyDag(t.Context(), connect.NewRequest(&apiv1.ApplyDagRequest{Spec: spec}))
	requireCode(t, connect.CodeInvalidArgument, err, "a DAG larger than a record")
	assert.ErrorContains(t, err, "larger than the largest record Kafka accepts")
}
