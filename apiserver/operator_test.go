package apiserver_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/operator"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/quota"
	"github.com/sundialhq/sundial/store"
)

// testOperator drives every operator action as the owning team's operator,
// as its viewer (PermissionDenied) and as another team's admin (NotFound).
func testOperator(t *testing.T, e *env, owner, other string) {
	ctx := t.Context()
	id := owner + ".job"
	apply(t, e, token(owner, auth.RoleAdmin), cronJob(id, owner))
	op, viewer, stranger := e.operator(token(owner, auth.RoleOperator)), e.operator(token(owner, auth.RoleViewer)), e.operator(token(other, auth.RoleAdmin))

	t.Run("refused", func(t *testing.T) {
		for name, c := range map[string]struct {
			client apiv1connect.OperatorServiceClient
			code   connect.Code
		}{"viewer": {viewer, connect.CodePermissionDenied}, "other team": {stranger, connect.CodeNotFound}} {
			_, err := c.client.PauseJob(ctx, connect.NewRequest(&apiv1.PauseJobRequest{JobId: id}))
			requireCode(t, c.code, err, name+" pause")
			_, err = c.client.ResumeJob(ctx, connect.NewRequest(&apiv1.ResumeJobRequest{JobId: id}))
			requireCode(t, c.code, err, name+" resume")
			_, err = c.client.TriggerJob(ctx, connect.NewRequest(&apiv1.TriggerJobRequest{JobId: id}))
			requireCode(t, c.code, err, name+" trigger")
			_, err = c.client.BackfillJob(ctx, connect.NewRequest(&apiv1.BackfillJobRequest{JobId: id, DryRun: true, MaxConcurrent: 1,
				From: timestamppb.New(time.Now().Add(-time.Hour)), To: timestamppb.Now()}))
			requireCode(t, c.code, err, name+" backfill")
			_, err = c.client.CancelRun(ctx, connect.NewRequest(&apiv1.CancelRunRequest{RunId: id + "@1000"}))
			requireCode(t, c.code, err, name+" cancel")
			_, err = c.client.RetryRun(ctx, connect.NewRequest(&apiv1.RetryRunRequest{RunId: id + "@1000"}))
			requireCode(t, c.code, err, name+" retry")
		}
		// Planning a definition of another team's id tells nothing of it.
		_, err := stranger.PlanApply(ctx, connect.NewRequest(&apiv1.PlanApplyRequest{Jobs: []*sundialv1.JobSpec{cronJob(id, other)}}))
		requireCode(t, connect.CodeNotFound, err, "other team plan")
		_, err = viewer.PlanApply(ctx, connect.NewRequest(&apiv1.PlanApplyRequest{Jobs: []*sundialv1.JobSpec{cronJob(id, owner)}}))
		requireCode(t, connect.CodePermissionDenied, err, "viewer plan")
		_, err = op.PauseJob(ctx, connect.NewRequest(&apiv1.PauseJobRequest{JobId: owner + ".missing"}))
		requireCode(t, connect.CodeNotFound, err, "missing job")
	})

	t.Run("bad requests", func(t *testing.T) {
		_, err := op.BackfillJob(ctx, connect.NewRequest(&apiv1.BackfillJobRequest{JobId: id}))
		requireCode(t, connect.CodeInvalidArgument, err, "backfill without range")
		assert.ErrorContains(t, err, "from, to: both required")
		assert.ErrorContains(t, err, "max concurrent 0")
		// A dry run enqueues nothing: it needs no max_concurrent.
		_, err = op.BackfillJob(ctx, connect.NewRequest(&apiv1.BackfillJobRequest{JobId: id, DryRun: true}))
		requireCode(t, connect.CodeInvalidArgument, err, "dry-run backfill without range")
		assert.NotContains(t, err.Error(), "max concurrent")
		// Finding 14: a range over the bound can never succeed; it is not
		// "unavailable, try again".
		_, err = op.BackfillJob(ctx, connect.NewRequest(&apiv1.BackfillJobRequest{JobId: id, DryRun: true, MaxConcurrent: 1,
			From: timestamppb.New(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)), To: timestamppb.New(time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC))}))
		requireCode(t, connect.CodeInvalidArgument, err, "backfill over the bound")
		assert.ErrorContains(t, err, "more than 100000 occurrences")
		_, err = op.CancelRun(ctx, connect.NewRequest(&apiv1.CancelRunRequest{RunId: "no-at-sign"}))
		requireCode(t, connect.CodeInvalidArgument, err, "cancel bad run id")
		_, err = op.TriggerJob(ctx, connect.NewRequest(&apiv1.TriggerJobRequest{JobId: id, Wait: true, WaitTimeout: durationpb.New(time.Hour)}))
		requireCode(t, connect.CodeInvalidArgument, err, "wait too long")
	})

	t.Run("pause and resume", func(t *testing.T) {
		res, err := op.PauseJob(ctx, connect.NewRequest(&apiv1.PauseJobRequest{JobId: id}))
		require.NoError(t, err)
		assert.True(t, res.Msg.GetChanged())
		assert.True(t, res.Msg.GetStatus().GetAccepted(), "%v", res.Msg.GetStatus())
		assert.False(t, res.Msg.GetStatus().GetOwnershipEnforced(), "the registry reads the shared topic")
		got, err := e.jobs(token(owner, auth.RoleViewer)).GetJob(ctx, connect.NewRequest(&apiv1.GetJobRequest{Id: id}))
		require.NoError(t, err)
		assert.True(t, got.Msg.GetJob().GetSpec().GetPaused())
		res, err = op.PauseJob(ctx, connect.NewRequest(&apiv1.PauseJobRequest{JobId: id}))
		require.NoError(t, err)
		assert.False(t, res.Msg.GetChanged(), "already paused")
		rres, err := op.ResumeJob(ctx, connect.NewRequest(&apiv1.ResumeJobRequest{JobId: id}))
		require.NoError(t, err)
		assert.True(t, rres.Msg.GetChanged())
	})

	t.Run("trigger", func(t *testing.T) {
		res, err := op.TriggerJob(ctx, connect.NewRequest(&apiv1.TriggerJobRequest{JobId: id}))
		require.NoError(t, err)
		assert.True(t, strings.HasPrefix(res.Msg.GetRunId(), id+"@"), res.Msg.GetRunId())
	})

	t.Run("backfill preview", func(t *testing.T) {
		from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		res, err := op.BackfillJob(ctx, connect.NewRequest(&apiv1.BackfillJobRequest{
			JobId: id, From: timestamppb.New(from), To: timestamppb.New(from.Add(time.Hour)), MaxConcurrent: 2, DryRun: true,
		}))
		require.NoError(t, err)
		assert.EqualValues(t, 12, res.Msg.GetOccurrenceCount(), "*/5 over an hour")
		require.Len(t, res.Msg.GetOccurrences(), 12)
		assert.Equal(t, from, res.Msg.GetOccurrences()[0].AsTime())
		assert.Zero(t, res.Msg.GetEnqueued())
		res, err = op.BackfillJob(ctx, connect.NewRequest(&apiv1.BackfillJobRequest{
			JobId: id, From: timestamppb.New(from), To: timestamppb.New(from.Add(time.Hour)), MaxConcurrent: 2, DryRun: true,
			Policy: apiv1.BackfillPolicy_BACKFILL_POLICY_ONE_PER_WINDOW, Window: durationpb.New(30 * time.Minute),
		}))
		require.NoError(t, err)
		assert.EqualValues(t, 2, res.Msg.GetOccurrenceCount(), "one per half hour")
	})

	t.Run("plan", func(t *testing.T) {
		changed := cronJob(id, owner)
		changed.Schedule.GetCron().Expression = "*/15 * * * *"
		res, err := op.PlanApply(ctx, connect.NewRequest(&apiv1.PlanApplyRequest{Jobs: []*sundialv1.JobSpec{changed, cronJob(owner+".new", owner)}, NextFires: 3}))
		require.NoError(t, err)
		require.Len(t, res.Msg.GetPlans(), 2)
		p := res.Msg.GetPlans()[0]
		assert.False(t, p.GetCreated())
		require.Len(t, p.GetChanges(), 1, "%v", p.GetChanges())
		assert.Equal(t, "schedule.cron.expression", p.GetChanges()[0].GetField())
		assert.Equal(t, `"*/15 * * * *"`, p.GetChanges()[0].GetAfter())
		assert.Len(t, p.GetNextFires(), 3)
		assert.NotEmpty(t, p.GetLoad(), "the load changes in the next hour")
		assert.True(t, res.Msg.GetPlans()[1].GetCreated())
	})

	t.Run("retry", func(t *testing.T) {
		_, err := op.RetryRun(ctx, connect.NewRequest(&apiv1.RetryRunRequest{RunId: "no-at-sign"}))
		requireCode(t, connect.CodeInvalidArgument, err, "retry bad run id")
		_, err = op.RetryRun(ctx, connect.NewRequest(&apiv1.RetryRunRequest{RunId: id + "@2000"}))
		requireCode(t, connect.CodeNotFound, err, "a run without history")
		due := time.UnixMilli(3000).UTC()
		failed, done := id+"@3000", id+"@4000"
		require.NoError(t, e.store.RecordRun(ctx, store.RunRecord{JobID: id, RunID: failed, Attempt: 1, Due: due,
			State: store.StateFailed, Error: "dead: http_503", UpdatedAt: time.Now()}))
		require.NoError(t, e.store.RecordRun(ctx, store.RunRecord{JobID: id, RunID: done, Attempt: 1, Due: due.Add(time.Second),
			State: store.StateSucceeded, UpdatedAt: time.Now()}))
		_, err = op.RetryRun(ctx, connect.NewRequest(&apiv1.RetryRunRequest{RunId: done}))
		requireCode(t, connect.CodeFailedPrecondition, err, "a succeeded run")
		assert.ErrorContains(t, err, "attempt 1 is succeeded")
		res, err := op.RetryRun(ctx, connect.NewRequest(&apiv1.RetryRunRequest{RunId: failed}))
		require.NoError(t, err)
		assert.Equal(t, id, res.Msg.GetJobId())
		assert.Equal(t, uint32(2), res.Msg.GetAttempt(), "a new attempt after the failed one")
		_, err = op.RetryRun(ctx, connect.NewRequest(&apiv1.RetryRunRequest{RunId: failed}))
		requireCode(t, connect.CodeFailedPrecondition, err, "retried already: attempt 2 is scheduled")
	})

	t.Run("cancel a run that is not running", func(t *testing.T) {
		_, err := op.CancelRun(ctx, connect.NewRequest(&apiv1.CancelRunRequest{RunId: id + "@1000"}))
		requireCode(t, connect.CodeFailedPrecondition, err)
		assert.ErrorContains(t, err, operator.ErrNotRunning.Error())
	})
}

// testAudit checks that the API's changes and operator actions are in the
// trail with the caller as actor, readable by the team and not by others.
func testAudit(t *testing.T, e *env, owner, other string) {
	ctx := t.Context()
	id := owner + ".job"
	admin := token(owner, auth.RoleAdmin)
	apply(t, e, admin, cronJob(id, owner))
	_, err := e.operator(token(owner, auth.RoleOperator)).PauseJob(ctx, connect.NewRequest(&apiv1.PauseJobRequest{JobId: id}))
	require.NoError(t, err)

	res, err := e.audit(token(owner, auth.RoleViewer)).ListAudit(ctx, connect.NewRequest(&apiv1.ListAuditRequest{JobId: id}))
	require.NoError(t, err)
	byAction := map[string]*apiv1.AuditRecord{}
	for _, r := range res.Msg.GetRecords() {
		byAction[r.GetAction()] = r
		assert.Equal(t, owner, r.GetTeam(), "record %s", r.GetId())
	}
	require.Contains(t, byAction, "job.created", "%v", res.Msg.GetRecords())
	require.Contains(t, byAction, operator.AuditPaused, "%v", res.Msg.GetRecords())
	assert.Equal(t, "token:"+admin, byAction["job.created"].GetActor())
	assert.NotEmpty(t, byAction["job.created"].GetChanges())
	assert.Equal(t, "token:"+token(owner, auth.RoleOperator), byAction[operator.AuditPaused].GetActor())

	byTeam, err := e.audit(clusterAdminToken).ListAudit(ctx, connect.NewRequest(&apiv1.ListAuditRequest{Team: owner}))
	require.NoError(t, err)
	assert.Len(t, byTeam.Msg.GetRecords(), len(res.Msg.GetRecords()))

	_, err = e.audit(token(other, auth.RoleAdmin)).ListAudit(ctx, connect.NewRequest(&apiv1.ListAuditRequest{JobId: id}))
	requireCode(t, connect.CodeNotFound, err, "other team's job")
	_, err = e.audit(token(other, auth.RoleAdmin)).ListAudit(ctx, connect.NewRequest(&apiv1.ListAuditRequest{Team: owner}))
	requireCode(t, connect.CodeNotFound, err, "another team reads as no team")
	_, err = e.audit(admin).ListAudit(ctx, connect.NewRequest(&apiv1.ListAuditRequest{JobId: id, Team: owner}))
	requireCode(t, connect.CodeInvalidArgument, err, "both")
}

// testQuotas reads a team's quota and usage as the team, another team and
// the cluster admin.
func testQuotas(t *testing.T, e *env, owner, other string) {
	ctx := t.Context()
	apply(t, e, token(owner, auth.RoleAdmin), cronJob(owner+".job", owner))
	require.NoError(t, e.store.TrackTeamJob(ctx, owner, owner+".job", 1<<40))
	require.NoError(t, e.store.SetQuota(ctx, quota.Quota{Team: owner, MaxJobs: 10, MaxConcurrentRuns: 3, MaxRunsPerMinute: 600}))

	res, err := e.quotas(token(owner, auth.RoleViewer)).GetQuotas(ctx, connect.NewRequest(&apiv1.GetQuotasRequest{}))
	require.NoError(t, err)
	require.Len(t, res.Msg.GetQuotas(), 1)
	q := res.Msg.GetQuotas()[0]
	assert.Equal(t, owner, q.GetTeam())
	assert.EqualValues(t, 10, q.GetMaxJobs())
	assert.EqualValues(t, 3, q.GetMaxConcurrentRuns())
	assert.EqualValues(t, 600, q.GetMaxRunsPerMinute())
	assert.EqualValues(t, 1, q.GetJobs())
	assert.EqualValues(t, 0, q.GetConcurrentRuns(), "counted in Redis, none running")

	_, err = e.quotas(token(other, auth.RoleAdmin)).GetQuotas(ctx, connect.NewRequest(&apiv1.GetQuotasRequest{Teams: []string{owner}}))
	requireCode(t, connect.CodeNotFound, err, "another team reads as no team, as SetQuotas answers it")
	_, err = e.quotas(token(other, auth.RoleAdmin)).GetQuotas(ctx, connect.NewRequest(&apiv1.GetQuotasRequest{Teams: []string{quota.DefaultTeam}}))
	requireCode(t, connect.CodePermissionDenied, err, "the default row is the cluster admin's")

	all, err := e.quotas(clusterAdminToken).GetQuotas(ctx, connect.NewRequest(&apiv1.GetQuotasRequest{}))
	require.NoError(t, err)
	assert.True(t, slices.ContainsFunc(all.Msg.GetQuotas(), func(q *apiv1.TeamQuota) bool { return q.GetTeam() == owner }), "%v", all.Msg.GetQuotas())
}
