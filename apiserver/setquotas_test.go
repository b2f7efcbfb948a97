package apiserver_test

import (
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/auth"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/quota"
)

func limitOf(n int64) *int64 { return &n }

// TestSetQuotasForTheClusterAdminOnly: the cluster admin sets a team's
// limits, each left out kept, and the change is audited with what it
// changed; a team's admin may not set its own team's, nor the default, and
// another team's is not found to it; nothing refused is written.
func TestSetQuotasForTheClusterAdminOnly(t *testing.T) {
	t.Parallel()
	e := newTeamsEnv(t)
	ctx := t.Context()
	e.team(t, "payments")
	e.team(t, "search")
	require.NoError(t, e.jobs.TrackTeamJob(ctx, "payments", "settle", 1))
	admin := e.quotas(e.admin)

	resp, err := admin.SetQuotas(ctx, connect.NewRequest(&apiv1.SetQuotasRequest{Team: "payments", MaxJobs: limitOf(10), MaxRunsPerMinute: limitOf(600)}))
	require.NoError(t, err)
	got := resp.Msg.GetQuota()
	assert.Equal(t, "payments", got.GetTeam())
	assert.Equal(t, uint32(10), got.GetMaxJobs())
	assert.Equal(t, uint32(600), got.GetMaxRunsPerMinute())
	assert.Equal(t, int64(1), got.GetJobs(), "the answer carries the team's usage")

	resp, err = admin.SetQuotas(ctx, connect.NewRequest(&apiv1.SetQuotasRequest{Team: "payments", MaxConcurrentRuns: limitOf(3)}))
	require.NoError(t, err)
	assert.Equal(t, []uint32{10, 3, 600}, []uint32{resp.Msg.GetQuota().GetMaxJobs(), resp.Msg.GetQuota().GetMaxConcurrentRuns(), resp.Msg.GetQuota().GetMaxRunsPerMinute()},
		"a limit left out keeps its value")

	resp, err = admin.SetQuotas(ctx, connect.NewRequest(&apiv1.SetQuotasRequest{Team: quota.DefaultTeam, MaxJobs: limitOf(100)}))
	require.NoError(t, err)
	assert.Equal(t, int64(-1), resp.Msg.GetQuota().GetJobs(), "the default row has no usage")

	viewer, _ := e.token(t, "payments", auth.RoleViewer)
	read, err := e.quotas(viewer).GetQuotas(ctx, connect.NewRequest(&apiv1.GetQuotasRequest{}))
	require.NoError(t, err)
	require.Len(t, read.Msg.GetQuotas(), 1)
	assert.Equal(t, uint32(3), read.Msg.GetQuotas()[0].GetMaxConcurrentRuns(), "the team reads what the cluster admin set")

	stored := func() []quota.Quota {
		rows, err := e.jobs.ListQuotas(ctx)
		require.NoError(t, err)
		return rows
	}
	want := []quota.Quota{{Team: quota.DefaultTeam, MaxJobs: 100}, {Team: "payments", MaxJobs: 10, MaxConcurrentRuns: 3, MaxRunsPerMinute: 600}}
	require.Equal(t, want, stored())

	teamAdmin, _ := e.token(t, "payments", auth.RoleAdmin)
	t.Run("a team's admin sets no quota, and another team's is not found", func(t *testing.T) {
		for team, code := range map[string]connect.Code{
			"payments":         connect.CodePermissionDenied,
			quota.DefaultTeam:  connect.CodePermissionDenied,
			"search":           connect.CodeNotFound,
			"no-such-team":     connect.CodeNotFound,
			"search\x00inject": connect.CodeNotFound,
		} {
			_, err := e.quotas(teamAdmin).SetQuotas(ctx, connect.NewRequest(&apiv1.SetQuotasRequest{Team: team, MaxJobs: limitOf(1_000_000)}))
			assert.Equal(t, code, connect.CodeOf(err), "payments' admin sets the quota of %q: %v", team, err)
		}
		_, err := e.quotas(viewer).SetQuotas(ctx, connect.NewRequest(&apiv1.SetQuotasRequest{Team: "payments", MaxJobs: limitOf(0)}))
		assert.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "%v", err)
		assert.Equal(t, want, stored(), "a refused call wrote a quota")
	})

	t.Run("bad values are refused naming each field", func(t *testing.T) {
		for _, tc := range []struct {
			req  *apiv1.SetQuotasRequest
			want []string
		}{
			{&apiv1.SetQuotasRequest{Team: "payments", MaxJobs: limitOf(-1), MaxRunsPerMinute: limitOf(quota.MaxLimit + 1)},
				[]string{"max_jobs -1: must be 0 (unlimited) or positive", "max_runs_per_minute 2147483648: at most 2147483647"}},
			{&apiv1.SetQuotasRequest{Team: "payments"}, []string{"set at least one"}},
			{&apiv1.SetQuotasRequest{MaxJobs: limitOf(1)}, []string{"team: required"}},
			{&apiv1.SetQuotasRequest{Team: "no/slash", MaxJobs: limitOf(1)}, []string{"team: team name"}},
			{&apiv1.SetQuotasRequest{Team: strings.Repeat("x", 10_000), MaxJobs: limitOf(1)}, []string{"team: team name"}},
		} {
			_, err := admin.SetQuotas(ctx, connect.NewRequest(tc.req))
			assert.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v: %v", tc.req, err)
			for _, w := range tc.want {
				assert.ErrorContains(t, err, w)
			}
		}
		assert.Equal(t, want, stored(), "a refused call wrote a quota")
	})

	var sets []string
	for _, r := range e.audit.all() {
		if r.Action != apiserver.AuditQuotaSet {
			continue
		}
		assert.True(t, strings.HasPrefix(r.Actor, "token:"), "actor %q", r.Actor)
		assert.Equal(t, r.Subject, r.Team)
		sets = append(sets, r.Subject+": "+r.Detail)
	}
	assert.Equal(t, []string{
		"payments: through the API: max_jobs unlimited -> 10, max_runs_per_minute unlimited -> 600",
		"payments: through the API: max_concurrent_runs unlimited -> 3",
		"*: through the API: max_jobs unlimited -> 100",
	}, sets, "one record per change that was made, none for a refused one")
}
