package apiserver_test

import (
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/auth"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// TestAPIWritesWorkWithOwnershipEnforced drives every write of the API
// against a registry and a DAG engine configured as by default: they read
// the team topics sundial.jobs.<team> only, so each change must reach its
// owner team's topic, the caller's or, for a cluster admin, the one the
// definition names. A team whose topic does not exist is told so at once
// (failed_precondition), not after a timeout.
func TestAPIWritesWorkWithOwnershipEnforced(t *testing.T) {
	t.Parallel()
	const team, other, ghost = "wr-alpha", "wr-beta", "wr-ghost" // ghost has no topic
	e := newEnvWith(t, envOptions{teams: []string{team, other}})
	ctx := t.Context()
	jobs, admin := e.jobs(token(team, auth.RoleAdmin)), e.jobs(clusterAdminToken)
	op := e.operator(token(team, auth.RoleOperator))

	// ApplyJob: created, then updated.
	id := team + ".job"
	res := apply(t, e, token(team, auth.RoleAdmin), cronJob(id, team))
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED, res.GetStatus().GetOutcome())
	assert.True(t, res.GetStatus().GetOwnershipEnforced(), "the registry reads the team topics only")
	changed := cronJob(id, team)
	changed.Labels["env"] = "prod"
	res = apply(t, e, token(team, auth.RoleAdmin), changed)
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UPDATED, res.GetStatus().GetOutcome())

	// PauseJob and ResumeJob re-apply the stored definition.
	p, err := op.PauseJob(ctx, connect.NewRequest(&apiv1.PauseJobRequest{JobId: id}))
	require.NoError(t, err)
	require.True(t, p.Msg.GetStatus().GetAccepted(), "%v", p.Msg.GetStatus())
	got, err := jobs.GetJob(ctx, connect.NewRequest(&apiv1.GetJobRequest{Id: id}))
	require.NoError(t, err)
	assert.True(t, got.Msg.GetJob().GetSpec().GetPaused())
	r, err := op.ResumeJob(ctx, connect.NewRequest(&apiv1.ResumeJobRequest{JobId: id}))
	require.NoError(t, err)
	require.True(t, r.Msg.GetStatus().GetAccepted(), "%v", r.Msg.GetStatus())
	assert.True(t, r.Msg.GetChanged())

	// A cluster admin writes for the definition's owner team.
	otherID := other + ".job"
	ares, err := admin.ApplyJob(ctx, connect.NewRequest(&apiv1.ApplyJobRequest{Spec: cronJob(otherID, other)}))
	require.NoError(t, err)
	require.True(t, ares.Msg.GetAccepted(), "%v", ares.Msg.GetStatus())

	// DeleteJob, by the team and by the cluster admin.
	d, err := jobs.DeleteJob(ctx, connect.NewRequest(&apiv1.DeleteJobRequest{Id: id}))
	require.NoError(t, err)
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_DELETED, d.Msg.GetStatus().GetOutcome(), "%v", d.Msg.GetStatus())
	d, err = admin.DeleteJob(ctx, connect.NewRequest(&apiv1.DeleteJobRequest{Id: otherID}))
	require.NoError(t, err)
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_DELETED, d.Msg.GetStatus().GetOutcome(), "%v", d.Msg.GetStatus())

	// ApplyDag and DeleteDag.
	dags := e.dags(token(team, auth.RoleAdmin))
	dagID := team + ".etl"
	dres, err := dags.ApplyDag(ctx, connect.NewRequest(&apiv1.ApplyDagRequest{Spec: twoNodeDag(dagID, team)}))
	require.NoError(t, err)
	require.True(t, dres.Msg.GetAccepted(), "%v", dres.Msg.GetStatus())
	assert.True(t, dres.Msg.GetStatus().GetOwnershipEnforced(), "the DAG engine reads the team topics only")
	dd, err := dags.DeleteDag(ctx, connect.NewRequest(&apiv1.DeleteDagRequest{Id: dagID}))
	require.NoError(t, err)
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_DELETED, dd.Msg.GetStatus().GetOutcome(), "%v", dd.Msg.GetStatus())

	// A team without its topic: refused clearly, nothing to wait for.
	_, err = e.jobs(token(ghost, auth.RoleAdmin)).ApplyJob(ctx, connect.NewRequest(&apiv1.ApplyJobRequest{Spec: cronJob(ghost+".job", ghost)}))
	requireCode(t, connect.CodeFailedPrecondition, err, "apply without the team's topic")
	assert.ErrorContains(t, err, "topic does not exist")
	_, err = e.dags(token(ghost, auth.RoleAdmin)).ApplyDag(ctx, connect.NewRequest(&apiv1.ApplyDagRequest{Spec: twoNodeDag(ghost+".etl", ghost)}))
	requireCode(t, connect.CodeFailedPrecondition, err, "apply a DAG without the team's topic")
}
