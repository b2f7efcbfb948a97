package apiserver_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sundialhq/sundial/auth"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// TestOnRealStack drives the API over HTTP on Kafka and Cassandra, with a
// registry and a DAG engine answering. Every call is made as the owning
// team and as another team; every subtest has teams of its own.
func TestOnRealStack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name string
		fn   func(t *testing.T, e *env, owner, other string)
	}{
		{"Unauthenticated", testUnauthenticated},
		{"ApplyGetDelete", testApplyGetDelete},
		{"ApplyRejected", testApplyRejected},
		{"ExpectedRevision", testExpectedRevision},
		{"ListSearchPaging", testListSearchPaging},
		{"JobView", testJobView},
		{"HTTPJSON", testHTTPJSON},
		{"Dags", testDags},
		{"TooLargeDag", testTooLargeDagIsInvalidArgument},
		{"HealthAndMetrics", testHealthAndMetrics},
		{"Operator", testOperator},
		{"Bulk", testBulk},
		{"Audit", testAudit},
		{"Quotas", testQuotas},
		{"OversizedSpecIsRefusedAtTheDoor", testOversizedSpecIsRefusedAtTheDoor},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			name := strings.ToLower(tc.name)
			tc.fn(t, e, "own-"+name, "oth-"+name)
		})
	}
}

// cronJob is a valid definition of team that fires every five minutes.
func cronJob(id, team string) *sundialv1.JobSpec {
	return &sundialv1.JobSpec{
		Id:        id,
		OwnerTeam: team,
		Labels:    map[string]string{"env": "test"},
		Schedule:  &sundialv1.Schedule{Kind: &sundialv1.Schedule_Cron{Cron: &sundialv1.Cron{Expression: "*/5 * * * *"}}},
		Target:    &sundialv1.Target{Kind: &sundialv1.Target_Http{Http: &sundialv1.HttpTarget{Url: "http://127.0.0.1:1/" + id}}},
	}
}

// requireCode checks that err is a Connect error with code.
func requireCode(t *testing.T, code connect.Code, err error, msgAndArgs ...any) {
	t.Helper()
	require.Error(t, err, msgAndArgs...)
	require.Equal(t, code, connect.CodeOf(err), "error %v; %v", err, fmt.Sprint(msgAndArgs...))
}

// apply applies spec as tok and requires the registry to accept it.
func apply(t *testing.T, e *env, tok string, spec *sundialv1.JobSpec) *apiv1.ApplyJobResponse {
	t.Helper()
	res, err := e.jobs(tok).ApplyJob(t.Context(), connect.NewRequest(&apiv1.ApplyJobRequest{Spec: spec}))
	require.NoError(t, err, "apply %s", spec.GetId())
	require.True(t, res.Msg.GetAccepted(), "apply %s: %v", spec.GetId(), res.Msg.GetStatus())
	return res.Msg
}

func testUnauthenticated(t *testing.T, e *env, owner, _ string) {
	ctx := t.Context()
	apply(t, e, token(owner, auth.RoleAdmin), cronJob(owner+".job", owner))
	for name, tok := range map[string]string{"no token": "", "unknown token": "nobody", "no role": owner + ":root"} {
		c := e.jobs(tok)
		_, err := c.GetJob(ctx, connect.NewRequest(&apiv1.GetJobRequest{Id: owner + ".job"}))
		requireCode(t, connect.CodeUnauthenticated, err, name)
		_, err = c.ListJobs(ctx, connect.NewRequest(&apiv1.ListJobsRequest{}))
		requireCode(t, connect.CodeUnauthenticated, err, name)
		_, err = c.ApplyJob(ctx, connect.NewRequest(&apiv1.ApplyJobRequest{Spec: cronJob(owner+".job2", owner)}))
		requireCode(t, connect.CodeUnauthenticated, err, name)
		_, err = c.DeleteJob(ctx, connect.NewRequest(&apiv1.DeleteJobRequest{Id: owner + ".job"}))
		requireCode(t, connect.CodeUnauthenticated, err, name)
		_, err = e.dags(tok).ListDags(ctx, connect.NewRequest(&apiv1.ListDagsRequest{}))
		requireCode(t, connect.CodeUnauthenticated, err, name)
	}
	// Nothing refused was applied or deleted.
	_, err := e.jobs(token(owner, auth.RoleViewer)).GetJob(ctx, connect.NewRequest(&apiv1.GetJobRequest{Id: owner + ".job2"}))
	requireCode(t, connect.CodeNotFound, err)
	_, err = e.jobs(token(owner, auth.RoleViewer)).GetJob(ctx, connect.NewRequest(&apiv1.GetJobRequest{Id: owner + ".job"}))
	require.NoError(t, err)
}

func testApplyGetDelete(t *testing.T, e *env, owner, other string) {
	ctx := t.Context()
	id := owner + ".nightly"
	admin, viewer := e.jobs(token(owner, auth.RoleAdmin)), e.jobs(token(owner, auth.RoleViewer))
	otherAdmin := e.jobs(token(other, auth.RoleAdmin))

	// A viewer may not apply; another team may not apply in the owner's name.
	_, err := viewer.ApplyJob(ctx, connect.NewRequest(&apiv1.ApplyJobRequest{Spec: cronJob(id, owner)}))
	requireCode(t, connect.CodePermissionDenied, err, "viewer applies")
	_, err = otherAdmin.ApplyJob(ctx, connect.NewRequest(&apiv1.ApplyJobRequest{Spec: cronJob(id, owner)}))
	requireCode(t, connect.CodePermissionDenied, err, "other team applies in the owner's name")

	res := apply(t, e, token(owner, auth.RoleAdmin), cronJob(id, owner))
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED, res.GetStatus().GetOutcome())
	assert.Equal(t, id, res.GetStatus().GetJobId())

	got, err := viewer.GetJob(ctx, connect.NewRequest(&apiv1.GetJobRequest{Id: id}))
	require.NoError(t, err)
	assert.Equal(t, id, got.Msg.GetJob().GetSpec().GetId())
	assert.Equal(t, owner, got.Msg.GetJob().GetSpec().GetOwnerTeam())
	assert.Equal(t, apiv1.ScheduleKind_SCHEDULE_KIND_CRON, got.Msg.GetJob().GetScheduleKind())
	assert.Equal(t, apiv1.DefinitionState_DEFINITION_STATE_ACTIVE, got.Msg.GetJob().GetState())

	// Another team sees nothing, cannot delete it, and cannot take the id
	// over by applying it as its own.
	_, err = otherAdmin.GetJob(ctx, connect.NewRequest(&apiv1.GetJobRequest{Id: id}))
	requireCode(t, connect.CodeNotFound, err, "other team gets")
	_, err = otherAdmin.DeleteJob(ctx, connect.NewRequest(&apiv1.DeleteJobRequest{Id: id}))
	requireCode(t, connect.CodeNotFound, err, "other team deletes")
	_, err = otherAdmin.ApplyJob(ctx, connect.NewRequest(&apiv1.ApplyJobRequest{Spec: cronJob(id, other)}))
	requireCode(t, connect.CodeNotFound, err, "other team takes the id over")
	_, err = viewer.DeleteJob(ctx, connect.NewRequest(&apiv1.DeleteJobRequest{Id: id}))
	requireCode(t, connect.CodePermissionDenied, err, "viewer deletes")
	got, err = viewer.GetJob(ctx, connect.NewRequest(&apiv1.GetJobRequest{Id: id}))
	require.NoError(t, err)
	assert.Equal(t, owner, got.Msg.GetJob().GetSpec().GetOwnerTeam(), "still the owner's")

	// An update is answered UPDATED; an identical one UNCHANGED.
	changed := cronJob(id, owner)
	changed.Paused = true
	res = apply(t, e, token(owner, auth.RoleAdmin), changed)
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UPDATED, res.GetStatus().GetOutcome())
	res = apply(t, e, clusterAdminToken, changed)
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UNCHANGED, res.GetStatus().GetOutcome(), "the cluster admin applies any team's job")

	del, err := admin.DeleteJob(ctx, connect.NewRequest(&apiv1.DeleteJobRequest{Id: id}))
	require.NoError(t, err)
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_DELETED, del.Msg.GetStatus().GetOutcome())
	_, err = viewer.GetJob(ctx, connect.NewRequest(&apiv1.GetJobRequest{Id: id}))
	requireCode(t, connect.CodeNotFound, err, "deleted")
	_, err = admin.DeleteJob(ctx, connect.NewRequest(&apiv1.DeleteJobRequest{Id: id}))
	requireCode(t, connect.CodeNotFound, err, "deleted twice")

	_, err = viewer.GetJob(ctx, connect.NewRequest(&apiv1.GetJobRequest{}))
	requireCode(t, connect.CodeInvalidArgument, err, "no id")
}

// testExpectedRevision: an apply that names the revision it edited is
// refused once another change has made a newer one, and changes nothing.
func testExpectedRevision(t *testing.T, e *env, owner, _ string) {
	ctx := t.Context()
	id := owner + ".edited"
	admin := e.jobs(token(owner, auth.RoleAdmin))
	create := func(spec *sundialv1.JobSpec, expected int64) (*apiv1.ApplyJobResponse, error) {
		resp, err := admin.ApplyJob(ctx, connect.NewRequest(&apiv1.ApplyJobRequest{Spec: spec, ExpectedRevision: &expected}))
		if err != nil {
			return nil, err
		}
		return resp.Msg, nil
	}
	res, err := create(cronJob(id, owner), 0)
	require.NoError(t, err, "a create expects no definition in force")
	require.True(t, res.GetAccepted())
	got, err := admin.GetJob(ctx, connect.NewRequest(&apiv1.GetJobRequest{Id: id}))
	require.NoError(t, err)
	read := got.Msg.GetJob().GetRevision()

	// Someone else changes it after it was read.
	meanwhile := cronJob(id, owner)
	meanwhile.Description = "changed by someone else"
	apply(t, e, token(owner, auth.RoleAdmin), meanwhile)

	edit := cronJob(id, owner)
	edit.Description = "the edit made on the old revision"
	_, err = create(edit, read)
	requireCode(t, connect.CodeFailedPrecondition, err, "an edit of a revision no longer in force")
	_, err = create(cronJob(id, owner), 0)
	requireCode(t, connect.CodeFailedPrecondition, err, "a create of a job that exists")
	got, err = admin.GetJob(ctx, connect.NewRequest(&apiv1.GetJobRequest{Id: id}))
	require.NoError(t, err)
	assert.Equal(t, "changed by someone else", got.Msg.GetJob().GetSpec().GetDescription(), "the refused edit changed nothing")

	res, err = create(edit, got.Msg.GetJob().GetRevision())
	require.NoError(t, err, "the edit made on the revision in force")
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UPDATED, res.GetStatus().GetOutcome())
}

func testApplyRejected(t *testing.T, e *env, owner, other string) {
	ctx := t.Context()
	bad := cronJob(owner+".bad", owner)
	bad.Schedule = &sundialv1.Schedule{Kind: &sundialv1.Schedule_Cron{Cron: &sundialv1.Cron{Expression: "61 * * * *"}}}
	bad.Target = nil
	res, err := e.jobs(token(owner, auth.RoleAdmin)).ApplyJob(ctx, connect.NewRequest(&apiv1.ApplyJobRequest{Spec: bad}))
	require.NoError(t, err)
	assert.False(t, res.Msg.GetAccepted())
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_REJECTED, res.Msg.GetStatus().GetOutcome())
	var fields []string
	for _, fe := range res.Msg.GetStatus().GetErrors() {
		fields = append(fields, fe.GetField())
		assert.NotEmpty(t, fe.GetReason(), "reason of %s", fe.GetField())
	}
	assert.Contains(t, strings.Join(fields, " "), "schedule", "field errors %v", res.Msg.GetStatus().GetErrors())
	assert.Contains(t, strings.Join(fields, " "), "target", "field errors %v", res.Msg.GetStatus().GetErrors())

	// Another team is refused before validation: it learns nothing.
	_, err = e.jobs(token(other, auth.RoleAdmin)).ApplyJob(ctx, connect.NewRequest(&apiv1.ApplyJobRequest{Spec: bad}))
	requireCode(t, connect.CodePermissionDenied, err)
	_, err = e.jobs(token(owner, auth.RoleAdmin)).ApplyJob(ctx, connect.NewRequest(&apiv1.ApplyJobRequest{}))
	requireCode(t, connect.CodeInvalidArgument, err, "no spec")
	noTeam := cronJob(owner+".noteam", "")
	_, err = e.jobs(token(owner, auth.RoleAdmin)).ApplyJob(ctx, connect.NewRequest(&apiv1.ApplyJobRequest{Spec: noTeam}))
	requireCode(t, connect.CodeInvalidArgument, err, "no owner team")
	assert.Contains(t, err.Error(), "spec.owner_team: required")
}

// listAll pages through ListJobs with pages of size and returns the ids.
func listAll(t *testing.T, e *env, tok string, f *apiv1.DefinitionFilter, size uint32) []string {
	t.Helper()
	var ids []string
	page := &apiv1.PageRequest{Size: size}
	for i := 0; ; i++ {
		require.Less(t, i, 1000, "listing does not end")
		res, err := e.jobs(tok).ListJobs(t.Context(), connect.NewRequest(&apiv1.ListJobsRequest{Filter: f, Page: page}))
		require.NoError(t, err)
		require.LessOrEqual(t, len(res.Msg.GetJobs()), int(size))
		for _, j := range res.Msg.GetJobs() {
			ids = append(ids, j.GetSpec().GetId())
		}
		if res.Msg.GetNextPageToken() == "" {
			return ids
		}
		page = &apiv1.PageRequest{Size: size, Token: res.Msg.GetNextPageToken()}
	}
}

func testListSearchPaging(t *testing.T, e *env, owner, other string) {
	ctx := t.Context()
	var ownJobs, otherJobs []string
	for i := range 5 {
		spec := cronJob(fmt.Sprintf("%s.job-%d", owner, i), owner)
		spec.Labels["n"] = fmt.Sprint(i % 2)
		if i == 3 {
			spec.Paused = true
		}
		if i == 4 {
			spec.Schedule = &sundialv1.Schedule{Kind: &sundialv1.Schedule_Interval{Interval: &sundialv1.Interval{Every: durationpb.New(time.Hour)}}}
			spec.Description = "Weekly Invoices"
		}
		apply(t, e, token(owner, auth.RoleAdmin), spec)
		ownJobs = append(ownJobs, spec.GetId())
	}
	for i := range 2 {
		spec := cronJob(fmt.Sprintf("%s.job-%d", other, i), other)
		spec.Description = "weekly invoices of the other team"
		apply(t, e, token(other, auth.RoleAdmin), spec)
		otherJobs = append(otherJobs, spec.GetId())
	}
	ownerTok, otherTok := token(owner, auth.RoleViewer), token(other, auth.RoleViewer)

	// Pages of 2 over every job of the store (other subtests' included)
	// hold exactly the caller's team's jobs.
	assert.ElementsMatch(t, ownJobs, listAll(t, e, ownerTok, nil, 2), "owner")
	assert.ElementsMatch(t, otherJobs, listAll(t, e, otherTok, nil, 2), "other team")
	assert.Empty(t, listAll(t, e, otherTok, &apiv1.DefinitionFilter{Team: owner}, 50), "other team filters by the owner's team")
	all := listAll(t, e, clusterAdminToken, nil, 500)
	assert.Subset(t, all, append(ownJobs, otherJobs...), "the cluster admin sees every team")
	assert.ElementsMatch(t, ownJobs, listAll(t, e, clusterAdminToken, &apiv1.DefinitionFilter{Team: owner}, 3), "cluster admin, by team")

	// Filters.
	assert.ElementsMatch(t, []string{ownJobs[1], ownJobs[3]},
		listAll(t, e, ownerTok, &apiv1.DefinitionFilter{Labels: map[string]string{"n": "1", "env": "test"}}, 50), "labels")
	assert.ElementsMatch(t, []string{ownJobs[3]},
		listAll(t, e, ownerTok, &apiv1.DefinitionFilter{State: apiv1.DefinitionState_DEFINITION_STATE_PAUSED}, 50), "paused")
	assert.Len(t, listAll(t, e, ownerTok, &apiv1.DefinitionFilter{State: apiv1.DefinitionState_DEFINITION_STATE_ACTIVE}, 50), 4, "active")
	assert.ElementsMatch(t, []string{ownJobs[4]},
		listAll(t, e, ownerTok, &apiv1.DefinitionFilter{ScheduleKind: apiv1.ScheduleKind_SCHEDULE_KIND_INTERVAL}, 50), "interval")

	// Search looks in ids, descriptions and label values, case-insensitively.
	search := func(tok, text string) []string {
		res, err := e.jobs(tok).SearchJobs(ctx, connect.NewRequest(&apiv1.SearchJobsRequest{Text: text, Page: &apiv1.PageRequest{Size: 500}}))
		require.NoError(t, err)
		var ids []string
		for _, j := range res.Msg.GetJobs() {
			ids = append(ids, j.GetSpec().GetId())
		}
		return ids
	}
	assert.ElementsMatch(t, []string{ownJobs[4]}, search(ownerTok, "WEEKLY"), "owner searches")
	assert.ElementsMatch(t, otherJobs, search(otherTok, "weekly"), "other team searches")
	assert.ElementsMatch(t, []string{ownJobs[2]}, search(ownerTok, owner+".job-2"), "by id")
	_, err := e.jobs(ownerTok).SearchJobs(ctx, connect.NewRequest(&apiv1.SearchJobsRequest{}))
	requireCode(t, connect.CodeInvalidArgument, err, "search without text")

	// Bad paging.
	_, err = e.jobs(ownerTok).ListJobs(ctx, connect.NewRequest(&apiv1.ListJobsRequest{Page: &apiv1.PageRequest{Size: 501}}))
	requireCode(t, connect.CodeInvalidArgument, err, "oversized page")
	_, err = e.jobs(ownerTok).ListJobs(ctx, connect.NewRequest(&apiv1.ListJobsRequest{Page: &apiv1.PageRequest{Token: "not-a-token"}}))
	requireCode(t, connect.CodeInvalidArgument, err, "bad token")
	first, err := e.jobs(ownerTok).ListJobs(ctx, connect.NewRequest(&apiv1.ListJobsRequest{Page: &apiv1.PageRequest{Size: 1}}))
	require.NoError(t, err)
	require.NotEmpty(t, first.Msg.GetNextPageToken())
	_, err = e.jobs(ownerTok).ListJobs(ctx, connect.NewRequest(&apiv1.ListJobsRequest{
		Filter: &apiv1.DefinitionFilter{Team: owner}, Page: &apiv1.PageRequest{Size: 1, Token: first.Msg.GetNextPageToken()},
	}))
	requireCode(t, connect.CodeInvalidArgument, err, "token of another filter")
}

func testJobView(t *testing.T, e *env, owner, other string) {
	ctx := t.Context()
	id := owner + ".view"
	apply(t, e, token(owner, auth.RoleAdmin), cronJob(id, owner))

	// Four attempts in the history: three succeeded, one failed, started
	// 1 s, 2 s, 3 s and 4 s after their due times.
	due := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	var recs []store.RunRecord
	for i := range 4 {
		d := due.Add(time.Duration(i) * 5 * time.Minute)
		state := store.StateSucceeded
		if i == 2 {
			state = store.StateFailed
		}
		started := d.Add(time.Duration(i+1) * time.Second)
		recs = append(recs, store.RunRecord{
			JobID: id, RunID: store.RunID(id, d), Attempt: 1, Due: d, State: state,
			Started: started, Finished: started.Add(time.Second), Duration: time.Second, UpdatedAt: started.Add(time.Second),
		})
	}
	recs[2].Error = "http 500"
	require.NoError(t, e.store.RecordRuns(ctx, recs))

	before := time.Now()
	res, err := e.jobs(token(owner, auth.RoleViewer)).GetJobView(ctx, connect.NewRequest(&apiv1.GetJobViewRequest{Id: id, NextFireTimes: 3}))
	require.NoError(t, err)
	v := res.Msg
	assert.Equal(t, id, v.GetJob().GetSpec().GetId())
	require.Len(t, v.GetNextFireTimes(), 3)
	prev := before.Add(-time.Minute)
	for _, ts := range v.GetNextFireTimes() {
		ft := ts.AsTime()
		assert.True(t, ft.After(prev), "fire times increase: %v after %v", ft, prev)
		assert.Zero(t, ft.Minute()%5, "every five minutes: %v", ft)
		prev = ft
	}
	// The registry recorded the next occurrence as scheduled: it is the
	// newest attempt, and counts in no statistic.
	require.Len(t, v.GetLastRuns(), 5, "%v", v.GetLastRuns())
	assert.Equal(t, "scheduled", v.GetLastRuns()[0].GetState())
	assert.Nil(t, v.GetLastRuns()[0].GetStartedAt())
	assert.Equal(t, recs[3].RunID, v.GetLastRuns()[1].GetRunId(), "newest first")
	assert.Equal(t, "failed", v.GetLastRuns()[2].GetState())
	assert.Equal(t, "http 500", v.GetLastRuns()[2].GetError())
	st := v.GetStats()
	assert.Equal(t, uint32(4), st.GetFinished())
	assert.Equal(t, uint32(3), st.GetSucceeded())
	assert.InDelta(t, 0.75, st.GetSuccessRate(), 1e-9)
	assert.Equal(t, 2*time.Second, st.GetTriggerLatencyP50().AsDuration())
	assert.Equal(t, 4*time.Second, st.GetTriggerLatencyP90().AsDuration())
	assert.Equal(t, 4*time.Second, st.GetTriggerLatencyP99().AsDuration())

	_, err = e.jobs(token(other, auth.RoleAdmin)).GetJobView(ctx, connect.NewRequest(&apiv1.GetJobViewRequest{Id: id}))
	requireCode(t, connect.CodeNotFound, err, "other team")
	_, err = e.jobs(token(owner, auth.RoleViewer)).GetJobView(ctx, connect.NewRequest(&apiv1.GetJobViewRequest{Id: id, NextFireTimes: 101}))
	requireCode(t, connect.CodeInvalidArgument, err, "too many fire times")

	// A paused job shows no fire time.
	paused := cronJob(id, owner)
	paused.Paused = true
	apply(t, e, token(owner, auth.RoleAdmin), paused)
	res, err = e.jobs(token(owner, auth.RoleViewer)).GetJobView(ctx, connect.NewRequest(&apiv1.GetJobViewRequest{Id: id}))
	require.NoError(t, err)
	assert.Empty(t, res.Msg.GetNextFireTimes())
	assert.GreaterOrEqual(t, len(res.Msg.GetLastRuns()), 4, "the history stays")
}
