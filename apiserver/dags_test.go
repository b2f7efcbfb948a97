package apiserver_test

import (
	"fmt"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/dagengine/dag"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
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

	testDagNodesStayInTheTeam(t, e, owner, other)
}

// testDagNodesStayInTheTeam: ApplyDag refuses a job_id node naming another
// team's job exactly as one naming a missing job, and an inline node owned
// by another team; a DAG of the team's own jobs is accepted.
func testDagNodesStayInTheTeam(t *testing.T, e *env, owner, other string) {
	ctx := t.Context()
	admin, otherAdmin := e.dags(token(owner, auth.RoleAdmin)), e.jobs(token(other, auth.RoleAdmin))
	for _, apply := range []struct {
		client apiv1connect.JobServiceClient
		spec   *sundialv1.JobSpec
	}{{e.jobs(token(owner, auth.RoleAdmin)), cronJob(owner+".work", owner)}, {otherAdmin, cronJob(other+".secret", other)}} {
		res, err := apply.client.ApplyJob(ctx, connect.NewRequest(&apiv1.ApplyJobRequest{Spec: apply.spec}))
		require.NoError(t, err)
		require.True(t, res.Msg.GetAccepted(), "%v", res.Msg.GetStatus())
	}
	jobNode := func(id, job string) *sundialv1.DagNode {
		return &sundialv1.DagNode{Id: id, Job: &sundialv1.DagNode_JobId{JobId: job}}
	}

	res, err := admin.ApplyDag(ctx, connect.NewRequest(&apiv1.ApplyDagRequest{Spec: &sundialv1.DagSpec{
		Id: owner + ".steal", OwnerTeam: owner,
		Nodes: []*sundialv1.DagNode{jobNode("mine", owner+".work"), jobNode("theirs", other+".secret"), jobNode("ghost", other+".ghost")},
	}}))
	require.NoError(t, err)
	require.False(t, res.Msg.GetAccepted())
	errs := res.Msg.GetStatus().GetErrors()
	require.Len(t, errs, 2, "%v", errs)
	for i, job := range map[int]string{0: other + ".secret", 1: other + ".ghost"} {
		assert.Equal(t, fmt.Sprintf("nodes[%d].job_id", i+1), errs[i].GetField())
		assert.Equal(t, dag.JobNotFound(job, owner)+": a node runs a job of the DAG's team; apply the job first", errs[i].GetReason())
	}

	inline := twoNodeDag(owner+".hog", owner)
	inline.Nodes[0].GetInline().OwnerTeam = other
	res, err = admin.ApplyDag(ctx, connect.NewRequest(&apiv1.ApplyDagRequest{Spec: inline}))
	require.NoError(t, err)
	require.False(t, res.Msg.GetAccepted())
	require.Len(t, res.Msg.GetStatus().GetErrors(), 1, "%v", res.Msg.GetStatus())
	assert.Equal(t, "nodes[0].inline.owner_team", res.Msg.GetStatus().GetErrors()[0].GetField())

	res, err = admin.ApplyDag(ctx, connect.NewRequest(&apiv1.ApplyDagRequest{Spec: &sundialv1.DagSpec{
		Id: owner + ".own", OwnerTeam: owner, Nodes: []*sundialv1.DagNode{jobNode("mine", owner+".work")},
	}}))
	require.NoError(t, err)
	require.True(t, res.Msg.GetAccepted(), "%v", res.Msg.GetStatus())
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
	// The whole-definition bound (jobspec.MaxSpecBytes) refuses it before
	// anything is produced: a rejection naming the record and the limit, not
	// an error to retry.
	res, err := e.dags(token(owner, auth.RoleAdmin)).ApplyDag(t.Context(), connect.NewRequest(&apiv1.ApplyDagRequest{Spec: spec}))
	require.NoError(t, err, "a DAG larger than a record is a rejection, never unavailable")
	require.False(t, res.Msg.GetAccepted())
	require.NotEmpty(t, res.Msg.GetStatus().GetErrors())
	assert.Equal(t, "record", res.Msg.GetStatus().GetErrors()[0].GetField(), "%v", res.Msg.GetStatus())
	assert.Contains(t, res.Msg.GetStatus().GetErrors()[0].GetReason(), "512 KiB")
}
