package apiserver_test

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/internal/topics"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// objectivesFixture is a history on the real stack: alpha's jobs
// alpha.breach (3 of 10 attempts late, each for another cause),
// alpha.spent (1 of 10 late: its 10 % budget spent, still met) and
// alpha.healthy (none late), alpha.plain (late, no label), alpha.typo (a
// label that does not parse) and alpha.moved (late runs filed under alpha,
// the job now beta's); and beta.worst, late every time.
type objectivesFixture struct {
	stack *stack
	now   time.Time
	teams *auth.MemoryStore
}

func setupObjectives(t *testing.T) objectivesFixture {
	t.Helper()
	s := setupStack(t, 1, topics.Names.Events)
	ctx := t.Context()
	f := objectivesFixture{stack: s, now: time.Date(2031, 3, 1, 12, 0, 0, 0, time.UTC), teams: auth.NewMemoryStore()}
	for _, team := range []string{"alpha", "beta"} {
		require.NoError(t, f.teams.CreateTeam(ctx, auth.Team{Name: team, CreatedAt: f.now}))
	}
	put := func(id, team, label string) {
		spec := &sundialv1.JobSpec{Id: id, OwnerTeam: team, Pool: "gpu",
			Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "noop"}}}}
		if label != "" {
			spec.Labels = map[string]string{"sundial.io/trigger-lag-objective": label}
		}
		b, err := proto.Marshal(spec)
		require.NoError(t, err)
		_, err = s.store.UpsertJob(ctx, store.Job{ID: id, Spec: b, Revision: 1, UpdatedAt: f.now.Add(-48 * time.Hour)})
		require.NoError(t, err)
	}
	put("alpha.breach", "alpha", "p99 <= 2s over 1h")
	put("alpha.spent", "alpha", "p90<=2s/1h")
	put("alpha.healthy", "alpha", "p99 <= 2s over 1d")
	put("alpha.plain", "alpha", "")
	put("alpha.typo", "alpha", "p100 <= 2s over 1h")
	put("alpha.moved", "beta", "p99 <= 2s over 1h")
	put("beta.worst", "beta", "p99 <= 1s over 1h")

	var recs []store.RunRecord
	// runs adds n attempts of job, one a minute from 50 minutes ago, each
	// started lag after its due time.
	runs := func(job, team string, n int, lag time.Duration) []store.RunRecord {
		out := make([]store.RunRecord, n)
		for i := range out {
			due := f.now.Add(-50*time.Minute + time.Duration(i)*time.Minute)
			out[i] = store.RunRecord{JobID: job, RunID: store.RunID(job, due), Attempt: 1, Due: due, State: store.StateSucceeded,
				Started: due.Add(lag), Finished: due.Add(lag + time.Second), UpdatedAt: due.Add(lag + time.Second), OwnerTeam: team}
		}
		return out
	}
	breach := runs("alpha.breach", "alpha", 10, 100*time.Millisecond)
	// 30 s at the dispatcher, 20 s in Kafka, 10 s waiting for a slot.
	late := func(r *store.RunRecord, dispatched, received, started time.Duration, reason string) {
		r.Dispatched, r.Received, r.Started, r.WaitReason = r.Due.Add(dispatched), r.Due.Add(received), r.Due.Add(started), reason
	}
	late(&breach[2], 30*time.Second, 31*time.Second, 32*time.Second, "dispatch_delay")
	late(&breach[5], 0, 20*time.Second, 21*time.Second, "backlog")
	late(&breach[7], 0, time.Second, 11*time.Second, "pool_full")
	spent := runs("alpha.spent", "alpha", 10, 0)
	spent[0].Started = spent[0].Due.Add(5 * time.Second)
	recs = append(append(append(recs, breach...), spent...), runs("alpha.healthy", "alpha", 5, time.Second)...)
	recs = append(recs, runs("alpha.plain", "alpha", 3, time.Minute)...)
	recs = append(recs, runs("alpha.typo", "alpha", 3, time.Minute)...)
	recs = append(recs, runs("alpha.moved", "alpha", 3, time.Minute)...)
	recs = append(recs, runs("beta.worst", "beta", 4, time.Minute)...)
	// An attempt older than every window, and one due later: neither counts.
	recs = append(recs, store.RunRecord{JobID: "alpha.healthy", RunID: store.RunID("alpha.healthy", f.now.Add(-30*time.Hour)), Attempt: 1,
		Due: f.now.Add(-30 * time.Hour), State: store.StateSucceeded, Started: f.now.Add(-29 * time.Hour), UpdatedAt: f.now.Add(-29 * time.Hour), OwnerTeam: "alpha"})
	recs = append(recs, store.RunRecord{JobID: "alpha.breach", RunID: store.RunID("alpha.breach", f.now.Add(time.Minute)), Attempt: 1,
		Due: f.now.Add(time.Minute), State: store.StateScheduled, UpdatedAt: f.now, OwnerTeam: "alpha"})
	require.NoError(t, s.store.RecordRuns(ctx, recs))
	return f
}

// client serves a run service over the fixture with the given bound of
// records read (0: the default).
func (f objectivesFixture) client(t *testing.T, scan int) apiv1connect.RunServiceClient {
	t.Helper()
	evlog, err := apiserver.NewEventLog([]kgo.Opt{kgo.SeedBrokers(f.stack.brokers...)}, f.stack.names.Events())
	require.NoError(t, err)
	svc, err := apiserver.NewRunService(apiserver.RunServiceConfig{History: f.stack.store, Index: f.stack.store, Jobs: f.stack.store,
		DagRuns: f.stack.store, Events: evlog, Logger: f.stack.logger, Now: func() time.Time { return f.now },
		ObjectiveScan: scan, Shards: 4, Teams: f.teams})
	require.NoError(t, err)
	srv := serve(t, func(mux *http.ServeMux) { mux.Handle(apiv1connect.NewRunServiceHandler(svc)) })
	return apiv1connect.NewRunServiceClient(srv.Client(), srv.URL)
}

func objectiveIDs(resp *apiv1.ListObjectivesResponse) []string {
	var ids []string
	for _, o := range resp.GetObjectives() {
		ids = append(ids, o.GetJobId())
	}
	return ids
}

func TestListObjectives(t *testing.T) {
	t.Parallel()
	f := setupObjectives(t)
	c := f.client(t, 0)
	ctx := t.Context()
	list := func(caller string, req *apiv1.ListObjectivesRequest) (*apiv1.ListObjectivesResponse, error) {
		resp, err := c.ListObjectives(ctx, as(caller, req))
		if err != nil {
			return nil, err
		}
		return resp.Msg, nil
	}

	t.Run("a team's jobs, least budget left first, with the cause of the worst breach", func(t *testing.T) {
		resp, err := list("owner", &apiv1.ListObjectivesRequest{})
		require.NoError(t, err)
		assert.Equal(t, []string{"alpha.breach", "alpha.spent", "alpha.healthy"}, objectiveIDs(resp),
			"no job without a label or with a bad one, none moved to another team, none of beta's")
		assert.False(t, resp.GetTruncated())
		assert.EqualValues(t, 3, resp.GetJobsRanked())
		assert.True(t, f.now.Add(-24*time.Hour).Equal(resp.GetWindowStart().AsTime()), "the default window is a day")

		b := resp.GetObjectives()[0]
		assert.Equal(t, "alpha", b.GetTeam())
		assert.EqualValues(t, 10, b.GetAttempts(), "the attempt due later is not counted")
		assert.EqualValues(t, 3, b.GetLate())
		assert.InDelta(t, 0.1, b.GetBudget(), 1e-9)
		assert.InDelta(t, -29.0, b.GetBudgetLeft(), 1e-9)
		assert.False(t, b.GetMet())
		assert.Equal(t, 32*time.Second, b.GetLagP99().AsDuration())
		assert.Equal(t, time.Hour, b.GetWindow().AsDuration(), "the objective's window, shorter than the request's")
		assert.Equal(t, map[string]uint32{"dispatcher": 1, "consumer": 1, "runner": 1}, b.GetLateByCause())
		w := b.GetWorst()
		require.NotNil(t, w)
		assert.Equal(t, store.RunID("alpha.breach", f.now.Add(-48*time.Minute)), w.GetRunId())
		assert.Equal(t, "dispatcher", w.GetCause())
		assert.Equal(t, 30*time.Second, w.GetCauseTime().AsDuration())
		assert.Equal(t, "shard "+strconv.Itoa(store.ShardOf("alpha.breach", 4)), w.GetCulprit())
		assert.Equal(t, "dispatch_delay", w.GetWaitReason())
		assert.Empty(t, b.GetLateAttempts(), "the ranking lists no late attempts")

		s := resp.GetObjectives()[1]
		assert.EqualValues(t, 1, s.GetLate())
		assert.InDelta(t, 0.0, s.GetBudgetLeft(), 1e-9)
		assert.True(t, s.GetMet(), "one late of a budget of one")
		h := resp.GetObjectives()[2]
		assert.EqualValues(t, 5, h.GetAttempts(), "the attempt of 30 h ago is out of the day's window")
		assert.InDelta(t, 1.0, h.GetBudgetLeft(), 1e-9)
		assert.Nil(t, h.GetWorst())
	})
	t.Run("paged", func(t *testing.T) {
		var got []string
		req := &apiv1.ListObjectivesRequest{PageSize: 2}
		for {
			resp, err := list("owner", req)
			require.NoError(t, err)
			got = append(got, objectiveIDs(resp)...)
			if resp.GetNextPageToken() == "" {
				break
			}
			req.PageToken = resp.GetNextPageToken()
		}
		assert.Equal(t, []string{"alpha.breach", "alpha.spent", "alpha.healthy"}, got)
		first, err := list("owner", &apiv1.ListObjectivesRequest{PageSize: 1})
		require.NoError(t, err)
		_, err = list("owner", &apiv1.ListObjectivesRequest{PageSize: 1, Window: durationpb.New(time.Hour), PageToken: first.GetNextPageToken()})
		requireConnectCode(t, connect.CodeInvalidArgument, err)
		assert.ErrorContains(t, err, "page_token: issued for another filter")
	})
	t.Run("one job, with its late attempts worst first", func(t *testing.T) {
		resp, err := list("owner", &apiv1.ListObjectivesRequest{JobId: "alpha.breach"})
		require.NoError(t, err)
		require.Len(t, resp.GetObjectives(), 1)
		o := resp.GetObjectives()[0]
		var causes, culprits []string
		for _, l := range o.GetLateAttempts() {
			causes, culprits = append(causes, l.GetCause()), append(culprits, l.GetCulprit())
		}
		assert.Equal(t, []string{"dispatcher", "consumer", "runner"}, causes)
		assert.Equal(t, "the runs topic's consumer lag", culprits[1])
		assert.Equal(t, "pool gpu", culprits[2])
		assert.True(t, f.now.Add(-time.Hour).Equal(resp.GetWindowStart().AsTime()), "the objective's window")
		assert.Equal(t, "p99 <= 2s over 1h", o.GetObjective())
	})
	t.Run("a job whose label does not parse says why", func(t *testing.T) {
		resp, err := list("owner", &apiv1.ListObjectivesRequest{JobId: "alpha.typo"})
		require.NoError(t, err)
		require.Len(t, resp.GetObjectives(), 1)
		assert.Contains(t, resp.GetObjectives()[0].GetObjectiveError(), "the percentile 100 must be above 0 and below 100")
		_, err = list("owner", &apiv1.ListObjectivesRequest{JobId: "alpha.plain"})
		requireConnectCode(t, connect.CodeFailedPrecondition, err)
		assert.ErrorContains(t, err, "has no label sundial.io/trigger-lag-objective")
	})
	t.Run("team A never sees team B's jobs", func(t *testing.T) {
		resp, err := list("other-viewer", &apiv1.ListObjectivesRequest{})
		require.NoError(t, err)
		assert.Equal(t, []string{"beta.worst"}, objectiveIDs(resp), "not alpha.moved: its runs were alpha's")
		_, err = list("owner", &apiv1.ListObjectivesRequest{Team: "beta"})
		requireConnectCode(t, connect.CodeNotFound, err)
		_, err = list("owner", &apiv1.ListObjectivesRequest{AllTeams: true})
		requireConnectCode(t, connect.CodePermissionDenied, err)
		for _, id := range []string{"beta.worst", "alpha.moved", "no.such-job"} {
			_, err = list("owner", &apiv1.ListObjectivesRequest{JobId: id})
			requireConnectCode(t, connect.CodeNotFound, err)
		}
	})
	t.Run("the cluster admin ranks any team, or every team", func(t *testing.T) {
		resp, err := list("cluster-admin", &apiv1.ListObjectivesRequest{Team: "beta"})
		require.NoError(t, err)
		assert.Equal(t, []string{"beta.worst"}, objectiveIDs(resp))
		resp, err = list("cluster-admin", &apiv1.ListObjectivesRequest{AllTeams: true})
		require.NoError(t, err)
		assert.Equal(t, []string{"beta.worst", "alpha.breach", "alpha.spent", "alpha.healthy"}, objectiveIDs(resp))
		_, err = list("cluster-admin", &apiv1.ListObjectivesRequest{})
		requireConnectCode(t, connect.CodeInvalidArgument, err)
		assert.ErrorContains(t, err, "team: required for a caller of no team")
	})
	t.Run("bad fields are named", func(t *testing.T) {
		_, err := list("owner", &apiv1.ListObjectivesRequest{PageSize: 101, Window: durationpb.New(8 * 24 * time.Hour)})
		requireConnectCode(t, connect.CodeInvalidArgument, err)
		assert.ErrorContains(t, err, "page_size 101: must be at most 100")
		assert.ErrorContains(t, err, "window 192h0m0s: at most 168h0m0s for a team's jobs")
		_, err = list("owner", &apiv1.ListObjectivesRequest{JobId: "alpha.breach", Team: "alpha"})
		requireConnectCode(t, connect.CodeInvalidArgument, err)
		assert.ErrorContains(t, err, "job_id: not with team or all_teams")
	})
}

// TestListObjectivesIsBounded: a call reads at most its bound of records,
// the newest, and says that its figures are partial.
func TestListObjectivesIsBounded(t *testing.T) {
	t.Parallel()
	f := setupObjectives(t)
	c := f.client(t, 12)
	resp, err := c.ListObjectives(t.Context(), as("owner", &apiv1.ListObjectivesRequest{}))
	require.NoError(t, err)
	assert.True(t, resp.Msg.GetTruncated())
	assert.EqualValues(t, 12, resp.Msg.GetRecordsRead())
	require.NotNil(t, resp.Msg.GetCountedFrom())
	// The newest 12 records of alpha are due in the last 4 minutes of the
	// runs (one a minute from 50 minutes ago, three jobs at a time).
	assert.True(t, resp.Msg.GetCountedFrom().AsTime().After(f.now.Add(-50*time.Minute)), "counted from %s", resp.Msg.GetCountedFrom().AsTime())
	var attempts uint32
	for _, o := range resp.Msg.GetObjectives() {
		attempts += o.GetAttempts()
	}
	assert.LessOrEqual(t, attempts, uint32(12))

	// Every team over a week: 169 hours a team, so 14 teams of the 15 are
	// read (2,400 team hours at most), the first by name.
	for i := range 13 {
		require.NoError(t, f.teams.CreateTeam(t.Context(), auth.Team{Name: fmt.Sprintf("zeta%02d", i), CreatedAt: f.now}))
	}
	wide := f.client(t, 0)
	all, err := wide.ListObjectives(t.Context(), as("cluster-admin", &apiv1.ListObjectivesRequest{AllTeams: true, Window: durationpb.New(7 * 24 * time.Hour)}))
	require.NoError(t, err)
	assert.True(t, all.Msg.GetTruncated(), "a team past the bound of team hours is not read")
	assert.Nil(t, all.Msg.GetCountedFrom(), "every record of the teams read was read")
	assert.Equal(t, []string{"beta.worst", "alpha.breach", "alpha.spent", "alpha.healthy"}, objectiveIDs(all.Msg))

	one, err := c.ListObjectives(t.Context(), as("owner", &apiv1.ListObjectivesRequest{JobId: "alpha.breach"}))
	require.NoError(t, err)
	assert.False(t, one.Msg.GetTruncated(), "alpha.breach has eleven records, within the bound of twelve")
	assert.EqualValues(t, 10, one.Msg.GetObjectives()[0].GetAttempts())
}
