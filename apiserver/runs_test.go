package apiserver_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/internal/topics"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// runsFixture is a job of team alpha with one run of two attempts and a
// second run, a job of team beta, and a DAG run of alpha with one node run.
type runsFixture struct {
	client             apiv1connect.RunServiceClient
	job, betaJob       string
	run, run2, betaRun string
	dagRun, nodeRun    string
	due, due2          time.Time
	eventsOfRun        int
}

func setupRuns(t *testing.T) runsFixture {
	t.Helper()
	// Three partitions, so that reading a run's events depends on finding
	// its job's partition.
	s := setupStack(t, 3, topics.Names.Events)
	ctx := t.Context()
	f := runsFixture{job: "alpha.report", betaJob: "beta.report",
		due: time.Date(2031, 3, 1, 10, 0, 0, 0, time.UTC), due2: time.Date(2031, 3, 1, 11, 0, 0, 0, time.UTC)}
	f.run, f.run2 = store.RunID(f.job, f.due), store.RunID(f.job, f.due2)
	f.betaRun = store.RunID(f.betaJob, f.due)
	s.putJob(t, f.job, "alpha", 1, "v1")
	s.putJob(t, f.betaJob, "beta", 1, "v1")

	at := func(d time.Duration) time.Time { return f.due.Add(d) }
	recs := []store.RunRecord{
		{JobID: f.job, RunID: f.run, Attempt: 1, Due: f.due, State: store.StateFailed, Started: at(time.Second),
			Finished: at(2 * time.Second), Duration: time.Second, Error: "http_503: unavailable", Log: []string{"calling", "got 503"}, UpdatedAt: at(2 * time.Second)},
		{JobID: f.job, RunID: f.run, Attempt: 2, Due: f.due, AttemptDue: at(time.Minute), State: store.StateSucceeded,
			Started: at(time.Minute), Finished: at(time.Minute + time.Second), Duration: time.Second, Log: []string{"ok"}, UpdatedAt: at(time.Minute + time.Second)},
		{JobID: f.job, RunID: f.run2, Attempt: 1, Due: f.due2, State: store.StateSucceeded, Started: f.due2,
			Finished: f.due2.Add(time.Second), Duration: time.Second, UpdatedAt: f.due2.Add(time.Second)},
		{JobID: f.betaJob, RunID: f.betaRun, Attempt: 1, Due: f.due, State: store.StateSucceeded, Started: f.due,
			Finished: at(time.Second), Duration: time.Second, UpdatedAt: at(time.Second)},
	}
	for i := range recs {
		recs[i].OwnerTeam = "alpha"
		if recs[i].JobID == f.betaJob {
			recs[i].OwnerTeam = "beta"
		}
	}
	// The second run started 20 s late, for want of an executor.
	recs[2].Started, recs[2].WaitReason = f.due2.Add(20*time.Second), "no_executor"
	recs[2].Dispatched, recs[2].Received, recs[2].Leased = f.due2, f.due2.Add(19*time.Second), f.due2.Add(20*time.Second)
	require.NoError(t, s.store.RecordRuns(ctx, recs))

	// The events of the first run, and events of other runs around them.
	events := []*sundialv1.RunEvent{
		{RunId: f.run, JobId: f.job, Attempt: 1, State: sundialv1.RunState_RUN_STATE_STARTED, OwnerTeam: "alpha"},
		{RunId: f.run2, JobId: f.job, Attempt: 1, State: sundialv1.RunState_RUN_STATE_STARTED, OwnerTeam: "alpha"},
		{RunId: f.run, JobId: f.job, Attempt: 1, State: sundialv1.RunState_RUN_STATE_FAILED, OwnerTeam: "alpha",
			Error: &sundialv1.RunError{Code: "http_503", Message: "unavailable", Retryable: true}},
		{RunId: f.betaRun, JobId: f.betaJob, Attempt: 1, State: sundialv1.RunState_RUN_STATE_STARTED, OwnerTeam: "beta"},
		{RunId: f.run, JobId: f.job, Attempt: 2, State: sundialv1.RunState_RUN_STATE_SUCCEEDED, OwnerTeam: "alpha", Log: []string{"ok"}},
	}
	for _, ev := range events {
		ev.DueTime = timestamppb.New(f.due)
		s.produce(t, s.names.Events(), ev.GetJobId(), ev)
		if ev.GetRunId() == f.run {
			f.eventsOfRun++
		}
	}

	// A DAG run of alpha whose node "load" runs an inline job.
	dagSpec, err := proto.Marshal(&sundialv1.DagSpec{Id: "alpha.etl", OwnerTeam: "alpha", Nodes: []*sundialv1.DagNode{
		{Id: "load", Job: &sundialv1.DagNode_Inline{Inline: &sundialv1.JobSpec{}}},
	}})
	require.NoError(t, err)
	f.dagRun = "alpha.etl@" + "1930000000000"
	f.nodeRun = f.dagRun + "/load"
	_, _, err = s.store.CreateDagRun(ctx, store.DagRun{ID: f.dagRun, DagID: "alpha.etl", Due: time.UnixMilli(1930000000000),
		Origin: "schedule", Spec: dagSpec, State: []byte{1}, Status: "running", Active: true, CreatedAt: time.Now(), UpdatedAt: time.Now()})
	require.NoError(t, err)
	require.NoError(t, s.store.RecordRun(ctx, store.RunRecord{JobID: "alpha.etl/load", RunID: f.nodeRun, Attempt: 1,
		Due: time.UnixMilli(1930000000000), State: store.StateRunning, Started: time.UnixMilli(1930000000000), UpdatedAt: time.UnixMilli(1930000000000)}))

	evlog, err := apiserver.NewEventLog([]kgo.Opt{kgo.SeedBrokers(s.brokers...)}, s.names.Events())
	require.NoError(t, err)
	svc, err := apiserver.NewRunService(apiserver.RunServiceConfig{History: s.store, Index: s.store, Jobs: s.store, DagRuns: s.store,
		Events: evlog, Logger: s.logger, Now: func() time.Time { return f.due2.Add(time.Hour) }})
	require.NoError(t, err)
	srv := serve(t, func(mux *http.ServeMux) { mux.Handle(apiv1connect.NewRunServiceHandler(svc)) })
	f.client = apiv1connect.NewRunServiceClient(srv.Client(), srv.URL)
	return f
}

func TestGetRun(t *testing.T) {
	t.Parallel()
	f := setupRuns(t)
	ctx := t.Context()

	t.Run("owner", func(t *testing.T) {
		resp, err := f.client.GetRun(ctx, as("owner", &apiv1.GetRunRequest{RunId: f.run}))
		require.NoError(t, err)
		run := resp.Msg.GetRun()
		assert.Equal(t, f.job, run.GetJobId())
		assert.Equal(t, "alpha", run.GetOwnerTeam())
		assert.True(t, f.due.Equal(run.GetDueTime().AsTime()))
		require.Len(t, run.GetAttempts(), 2)
		first, second := run.GetAttempts()[0], run.GetAttempts()[1]
		assert.Equal(t, uint32(1), first.GetAttempt())
		assert.Equal(t, apiv1.RunAttemptState_RUN_ATTEMPT_STATE_FAILED, first.GetState())
		assert.Equal(t, "http_503: unavailable", first.GetError())
		assert.Equal(t, []string{"calling", "got 503"}, first.GetLog())
		assert.Equal(t, apiv1.RunAttemptState_RUN_ATTEMPT_STATE_SUCCEEDED, second.GetState())
		assert.Equal(t, time.Second, second.GetDuration().AsDuration())
		assert.Equal(t, "unknown", first.GetCause(), "history without step times names no step")
		assert.Nil(t, first.GetCauseTime())
		require.Len(t, run.GetEvents(), f.eventsOfRun, "events: %v", run.GetEvents())
		var states []sundialv1.RunState
		for _, ev := range run.GetEvents() {
			assert.Equal(t, f.run, ev.GetRunId())
			states = append(states, ev.GetState())
		}
		assert.Equal(t, []sundialv1.RunState{sundialv1.RunState_RUN_STATE_STARTED, sundialv1.RunState_RUN_STATE_FAILED,
			sundialv1.RunState_RUN_STATE_SUCCEEDED}, states)
	})
	t.Run("a DAG node's run, as the owner", func(t *testing.T) {
		resp, err := f.client.GetRun(ctx, as("owner", &apiv1.GetRunRequest{RunId: f.nodeRun}))
		require.NoError(t, err)
		assert.Equal(t, "alpha.etl/load", resp.Msg.GetRun().GetJobId())
		require.Len(t, resp.Msg.GetRun().GetAttempts(), 1)
	})
	t.Run("another team", func(t *testing.T) {
		for _, id := range []string{f.run, f.nodeRun} {
			_, err := f.client.GetRun(ctx, as("other", &apiv1.GetRunRequest{RunId: id}))
			requireConnectCode(t, connect.CodeNotFound, err)
		}
		// And the other team reads its own run.
		resp, err := f.client.GetRun(ctx, as("other", &apiv1.GetRunRequest{RunId: f.betaRun}))
		require.NoError(t, err)
		assert.Equal(t, "beta", resp.Msg.GetRun().GetOwnerTeam())
	})
	t.Run("no principal", func(t *testing.T) {
		_, err := f.client.GetRun(ctx, as("", &apiv1.GetRunRequest{RunId: f.run}))
		requireConnectCode(t, connect.CodeUnauthenticated, err)
	})
	t.Run("bad requests", func(t *testing.T) {
		_, err := f.client.GetRun(ctx, as("owner", &apiv1.GetRunRequest{}))
		requireConnectCode(t, connect.CodeInvalidArgument, err)
		for _, id := range []string{"alpha.report@1", "nojob", "unknown.job@1930000000000", "alpha.etl@1930000000000/nosuchnode"} {
			_, err = f.client.GetRun(ctx, as("owner", &apiv1.GetRunRequest{RunId: id}))
			requireConnectCode(t, connect.CodeNotFound, err)
		}
	})
}

func TestListRuns(t *testing.T) {
	t.Parallel()
	f := setupRuns(t)
	ctx := t.Context()
	list := func(caller string, req *apiv1.ListRunsRequest) (*apiv1.ListRunsResponse, error) {
		resp, err := f.client.ListRuns(ctx, as(caller, req))
		if err != nil {
			return nil, err
		}
		return resp.Msg, nil
	}
	ids := func(as []*apiv1.AttemptDetail) []string {
		var out []string
		for _, a := range as {
			out = append(out, a.GetRunId()+"#"+string(rune('0'+a.GetAttempt())))
		}
		return out
	}

	t.Run("owner, every page", func(t *testing.T) {
		var got []string
		req := &apiv1.ListRunsRequest{JobId: f.job, PageSize: 1}
		pages := 0
		for {
			resp, err := list("owner", req)
			require.NoError(t, err)
			got = append(got, ids(resp.GetAttempts())...)
			pages++
			if pages == 1 {
				require.NotNil(t, resp.GetSummary())
				assert.Equal(t, int64(2), resp.GetSummary().GetRuns())
				assert.Equal(t, int64(1), resp.GetSummary().GetFailures())
			}
			if resp.GetNextPageToken() == "" {
				break
			}
			req.PageToken = resp.GetNextPageToken()
		}
		assert.Equal(t, []string{f.run2 + "#1", f.run + "#2", f.run + "#1"}, got, "newest due first, attempt descending")
		assert.Equal(t, 3, pages)
	})
	t.Run("owner, filtered", func(t *testing.T) {
		resp, err := list("owner", &apiv1.ListRunsRequest{JobId: f.job,
			States: []apiv1.RunAttemptState{apiv1.RunAttemptState_RUN_ATTEMPT_STATE_FAILED}})
		require.NoError(t, err)
		assert.Equal(t, []string{f.run + "#1"}, ids(resp.GetAttempts()))
		resp, err = list("owner", &apiv1.ListRunsRequest{JobId: f.job, DueAfter: timestamppb.New(f.due.Add(time.Minute))})
		require.NoError(t, err)
		assert.Equal(t, []string{f.run2 + "#1"}, ids(resp.GetAttempts()))
		resp, err = list("owner", &apiv1.ListRunsRequest{JobId: f.job, DueBefore: timestamppb.New(f.due2)})
		require.NoError(t, err)
		assert.Equal(t, []string{f.run + "#2", f.run + "#1"}, ids(resp.GetAttempts()))
	})
	t.Run("owner, a DAG run's node runs", func(t *testing.T) {
		resp, err := list("owner", &apiv1.ListRunsRequest{DagRunId: f.dagRun})
		require.NoError(t, err)
		assert.Equal(t, []string{f.nodeRun + "#1"}, ids(resp.GetAttempts()))
	})
	t.Run("another team", func(t *testing.T) {
		for _, req := range []*apiv1.ListRunsRequest{{JobId: f.job}, {DagRunId: f.dagRun}} {
			resp, err := list("other", req)
			require.NoError(t, err)
			assert.Empty(t, resp.GetAttempts())
			assert.Nil(t, resp.GetSummary(), "no summary of another team's job")
		}
		resp, err := list("other", &apiv1.ListRunsRequest{JobId: f.betaJob})
		require.NoError(t, err)
		assert.Equal(t, []string{f.betaRun + "#1"}, ids(resp.GetAttempts()))
	})
	t.Run("no principal", func(t *testing.T) {
		_, err := list("", &apiv1.ListRunsRequest{JobId: f.job})
		requireConnectCode(t, connect.CodeUnauthenticated, err)
	})
	t.Run("bad requests", func(t *testing.T) {
		first, err := list("owner", &apiv1.ListRunsRequest{JobId: f.job, PageSize: 1})
		require.NoError(t, err)
		require.NotEmpty(t, first.GetNextPageToken())
		for name, req := range map[string]*apiv1.ListRunsRequest{
			"both selections":        {JobId: f.job, DagRunId: f.dagRun},
			"oversized page":         {JobId: f.job, PageSize: 5000},
			"negative page":          {JobId: f.job, PageSize: -1},
			"garbage token":          {JobId: f.job, PageToken: "%%%"},
			"token of other filters": {JobId: f.betaJob, PageToken: first.GetNextPageToken()},
			"unknown state":          {JobId: f.job, States: []apiv1.RunAttemptState{42}},
			"empty due range":        {JobId: f.job, DueAfter: timestamppb.New(f.due2), DueBefore: timestamppb.New(f.due)},
		} {
			_, err := list("owner", req)
			requireConnectCode(t, connect.CodeInvalidArgument, err)
			t.Logf("%s: %v", name, err)
		}
		_, err = list("cluster-admin", &apiv1.ListRunsRequest{})
		requireConnectCode(t, connect.CodeInvalidArgument, err)
		t.Logf("a cluster admin naming no team: %v", err)
	})
}

// TestListTeamRuns: without a job, ListRuns lists the caller's team's runs
// of every job in the window, paged, filtered by state and lateness, with
// the wait reason and the timeline; a team cannot list another's.
func TestListTeamRuns(t *testing.T) {
	t.Parallel()
	f := setupRuns(t)
	ctx := t.Context()
	window := func(req *apiv1.ListRunsRequest) *apiv1.ListRunsRequest {
		req.DueAfter, req.DueBefore = timestamppb.New(f.due.Add(-time.Hour)), timestamppb.New(f.due2.Add(time.Hour))
		return req
	}
	list := func(caller string, req *apiv1.ListRunsRequest) ([]string, *apiv1.ListRunsResponse, error) {
		resp, err := f.client.ListRuns(ctx, as(caller, req))
		if err != nil {
			return nil, nil, err
		}
		var ids []string
		for _, a := range resp.Msg.GetAttempts() {
			ids = append(ids, a.GetRunId()+"#"+string(rune('0'+a.GetAttempt())))
		}
		return ids, resp.Msg, nil
	}

	t.Run("every page of the caller's team", func(t *testing.T) {
		var got []string
		req := window(&apiv1.ListRunsRequest{PageSize: 1})
		for {
			ids, resp, err := list("owner", req)
			require.NoError(t, err)
			got = append(got, ids...)
			if resp.GetNextPageToken() == "" {
				break
			}
			req.PageToken = resp.GetNextPageToken()
		}
		assert.Equal(t, []string{f.run2 + "#1", f.run + "#2", f.run + "#1"}, got, "alpha's runs of every job, newest first; never beta's")
	})
	t.Run("the default window is the last hour", func(t *testing.T) {
		ids, _, err := list("owner", &apiv1.ListRunsRequest{})
		require.NoError(t, err)
		assert.Equal(t, []string{f.run2 + "#1"}, ids)
	})
	t.Run("late by at least 5 s, with the reason and the timeline", func(t *testing.T) {
		_, resp, err := list("owner", window(&apiv1.ListRunsRequest{MinLateBy: durationpb.New(5 * time.Second)}))
		require.NoError(t, err)
		require.Len(t, resp.GetAttempts(), 1)
		a := resp.GetAttempts()[0]
		assert.Equal(t, f.run2, a.GetRunId())
		assert.Equal(t, "no_executor", a.GetWaitReason())
		assert.Equal(t, "alpha", a.GetOwnerTeam())
		assert.True(t, f.due2.Add(19*time.Second).Equal(a.GetReceiveTime().AsTime()))
		// Dispatched on time, received 19 s later: it lost its time in the
		// runners' consumer lag, the step the run page names.
		assert.Equal(t, "consumer", a.GetCause())
		assert.Equal(t, 19*time.Second, a.GetCauseTime().AsDuration())
	})
	t.Run("by state", func(t *testing.T) {
		ids, _, err := list("owner", window(&apiv1.ListRunsRequest{States: []apiv1.RunAttemptState{apiv1.RunAttemptState_RUN_ATTEMPT_STATE_FAILED}}))
		require.NoError(t, err)
		assert.Equal(t, []string{f.run + "#1"}, ids)
	})
	t.Run("team A cannot list team B's runs", func(t *testing.T) {
		_, _, err := list("owner", window(&apiv1.ListRunsRequest{Team: "beta"}))
		requireConnectCode(t, connect.CodeNotFound, err)
		_, _, missing := list("owner", window(&apiv1.ListRunsRequest{Team: "no-such-team"}))
		requireConnectCode(t, connect.CodeNotFound, missing)
		assert.Equal(t, strings.ReplaceAll(missing.Error(), "no-such-team", "beta"), err.Error(), "another team reads exactly as no team")
		ids, _, err := list("other", window(&apiv1.ListRunsRequest{}))
		require.NoError(t, err)
		assert.Equal(t, []string{f.betaRun + "#1"}, ids, "beta lists its own")
		_, resp, err := list("owner", window(&apiv1.ListRunsRequest{JobId: f.betaJob}))
		require.NoError(t, err)
		assert.Empty(t, resp.GetAttempts(), "nor another team's job")
	})
	t.Run("a cluster admin names the team", func(t *testing.T) {
		ids, _, err := list("cluster-admin", window(&apiv1.ListRunsRequest{Team: "beta"}))
		require.NoError(t, err)
		assert.Equal(t, []string{f.betaRun + "#1"}, ids)
	})
}
