package apiserver_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/enqueue"
	"github.com/sundialhq/sundial/internal/topics"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

type dlqFixture struct {
	s      *stack
	client apiv1connect.DlqServiceClient
	now    time.Time
	// alphaRuns are the dead runs of team alpha, oldest first; betaRun is
	// team beta's.
	alphaRuns []string
	betaRun   string
}

func setupDlq(t *testing.T) dlqFixture {
	t.Helper()
	s := setupStack(t, 2, topics.Names.DLQ)
	// The enqueuer's wake-ups go to sundial.shards, one partition per shard.
	resp, err := s.admin.CreateTopic(t.Context(), 4, -1, nil, s.names.Shards())
	require.NoError(t, err)
	require.NoError(t, resp.Err)

	f := dlqFixture{s: s, now: time.Now().UTC()}
	s.putJob(t, "alpha.sync", "alpha", 1, "stored")
	s.putJob(t, "beta.sync", "beta", 1, "stored")
	dead := func(job, team string, due time.Time, deadAt time.Time) string {
		run := &sundialv1.Run{RunId: store.RunID(job, due), JobId: job, DueTime: timestamppb.New(due), Attempt: 3,
			OwnerTeam: team, Payload: []byte("stored"), DefinitionOffset: 1}
		s.produce(t, s.names.DLQ(), job, &sundialv1.DeadLetter{Run: run, Attempts: 3, DeadAt: timestamppb.New(deadAt),
			LastError: &sundialv1.RunError{Code: "http_500", Message: "boom"}, RunnerId: "runner-1"})
		return run.GetRunId()
	}
	base := f.now.Add(-time.Hour).Truncate(time.Millisecond)
	for i := range 3 {
		f.alphaRuns = append(f.alphaRuns, dead("alpha.sync", "alpha", base.Add(time.Duration(i)*time.Minute), base.Add(time.Duration(i)*time.Minute+time.Second)))
	}
	f.betaRun = dead("beta.sync", "beta", base, base.Add(2*time.Second))

	enqCl, err := kgo.NewClient(kgo.SeedBrokers(s.brokers...), kgo.RecordPartitioner(enqueue.Partitioner(s.names, nil)))
	require.NoError(t, err)
	t.Cleanup(enqCl.Close)
	enq, err := enqueue.New(enqueue.Config{Store: s.store, Client: enqCl, Topics: s.names, Shards: 4})
	require.NoError(t, err)
	svc, err := apiserver.NewDlqService(apiserver.DlqServiceConfig{
		DeadLetters: apiserver.KafkaDeadLetters{Opts: []kgo.Opt{kgo.SeedBrokers(s.brokers...)}, Topic: s.names.DLQ()},
		Jobs:        s.store, Enqueuer: enq, Now: func() time.Time { return f.now }, Logger: s.logger,
	})
	require.NoError(t, err)
	srv := serve(t, func(mux *http.ServeMux) { mux.Handle(apiv1connect.NewDlqServiceHandler(svc)) })
	f.client = apiv1connect.NewDlqServiceClient(srv.Client(), srv.URL)
	return f
}

func runIDsOf(dls []*sundialv1.DeadLetter) []string {
	var out []string
	for _, dl := range dls {
		out = append(out, dl.GetRun().GetRunId())
	}
	return out
}

func TestListDeadLetters(t *testing.T) {
	t.Parallel()
	f := setupDlq(t)
	ctx := t.Context()

	t.Run("owner, every page", func(t *testing.T) {
		var got []string
		req := &apiv1.ListDeadLettersRequest{PageSize: 2}
		for {
			resp, err := f.client.ListDeadLetters(ctx, as("owner", req))
			require.NoError(t, err)
			got = append(got, runIDsOf(resp.Msg.GetDeadLetters())...)
			if resp.Msg.GetNextPageToken() == "" {
				break
			}
			req.PageToken = resp.Msg.GetNextPageToken()
		}
		assert.Equal(t, f.alphaRuns, got, "the team's dead runs, oldest first, and no other team's")
	})
	t.Run("owner, filtered", func(t *testing.T) {
		resp, err := f.client.ListDeadLetters(ctx, as("owner", &apiv1.ListDeadLettersRequest{
			Filter: &apiv1.DeadLetterFilter{RunId: f.alphaRuns[1]}}))
		require.NoError(t, err)
		assert.Equal(t, f.alphaRuns[1:2], runIDsOf(resp.Msg.GetDeadLetters()))
	})
	t.Run("another team", func(t *testing.T) {
		resp, err := f.client.ListDeadLetters(ctx, as("other", &apiv1.ListDeadLettersRequest{
			Filter: &apiv1.DeadLetterFilter{JobId: "alpha.sync"}}))
		require.NoError(t, err)
		assert.Empty(t, resp.Msg.GetDeadLetters())
		resp, err = f.client.ListDeadLetters(ctx, as("other", &apiv1.ListDeadLettersRequest{}))
		require.NoError(t, err)
		assert.Equal(t, []string{f.betaRun}, runIDsOf(resp.Msg.GetDeadLetters()))
	})
	t.Run("cluster admin sees every team", func(t *testing.T) {
		resp, err := f.client.ListDeadLetters(ctx, as("cluster-admin", &apiv1.ListDeadLettersRequest{}))
		require.NoError(t, err)
		assert.Len(t, resp.Msg.GetDeadLetters(), 4)
	})
	t.Run("no principal", func(t *testing.T) {
		_, err := f.client.ListDeadLetters(ctx, as("", &apiv1.ListDeadLettersRequest{}))
		requireConnectCode(t, connect.CodeUnauthenticated, err)
	})
	t.Run("bad requests", func(t *testing.T) {
		for _, req := range []*apiv1.ListDeadLettersRequest{
			{PageSize: 1001},
			{PageToken: "not-a-token"},
			{Filter: &apiv1.DeadLetterFilter{DeadAfter: timestamppb.New(f.now), DeadBefore: timestamppb.New(f.now.Add(-time.Hour))}},
		} {
			_, err := f.client.ListDeadLetters(ctx, as("owner", req))
			requireConnectCode(t, connect.CodeInvalidArgument, err)
		}
	})
}

func TestReplayDeadLetters(t *testing.T) {
	t.Parallel()
	f := setupDlq(t)
	ctx := t.Context()
	// The definition changed after the runs died: a replay runs the new one.
	f.s.putJob(t, "alpha.sync", "alpha", 2, "current")
	// A job deleted after its run died: nothing to replay it with.
	f.s.putJob(t, "alpha.gone", "alpha", 1, "stored")
	goneDue := f.now.Add(-time.Hour).Truncate(time.Millisecond)
	gone := store.RunID("alpha.gone", goneDue)
	f.s.produce(t, f.s.names.DLQ(), "alpha.gone", &sundialv1.DeadLetter{Run: &sundialv1.Run{RunId: gone, JobId: "alpha.gone",
		DueTime: timestamppb.New(goneDue), OwnerTeam: "alpha"}, Attempts: 1, DeadAt: timestamppb.New(goneDue)})
	_, err := f.s.store.DeleteJob(ctx, "alpha.gone", 2, time.Now())
	require.NoError(t, err)
	replayed := func(t *testing.T) map[string]*sundialv1.Run {
		t.Helper()
		out := map[string]*sundialv1.Run{}
		for shard := range 4 {
			for e, err := range f.s.store.ListBucket(ctx, store.BucketOf(f.now), shard) {
				require.NoError(t, err)
				run := &sundialv1.Run{}
				require.NoError(t, proto.Unmarshal(e.Payload, run))
				out[e.RunID] = run
			}
		}
		return out
	}

	t.Run("viewer may not replay", func(t *testing.T) {
		_, err := f.client.ReplayDeadLetters(ctx, as("owner", &apiv1.ReplayDeadLettersRequest{All: true}))
		requireConnectCode(t, connect.CodePermissionDenied, err)
	})
	t.Run("an empty selection needs all", func(t *testing.T) {
		_, err := f.client.ReplayDeadLetters(ctx, as("owner-operator", &apiv1.ReplayDeadLettersRequest{}))
		requireConnectCode(t, connect.CodeInvalidArgument, err)
	})
	t.Run("no principal", func(t *testing.T) {
		_, err := f.client.ReplayDeadLetters(ctx, as("", &apiv1.ReplayDeadLettersRequest{All: true}))
		requireConnectCode(t, connect.CodeUnauthenticated, err)
	})
	t.Run("another team replays nothing of alpha", func(t *testing.T) {
		resp, err := f.client.ReplayDeadLetters(ctx, as("other", &apiv1.ReplayDeadLettersRequest{
			Filter: &apiv1.DeadLetterFilter{JobId: "alpha.sync"}}))
		require.NoError(t, err)
		assert.Empty(t, resp.Msg.GetRunIds())
		assert.Empty(t, replayed(t))
	})
	t.Run("dry run", func(t *testing.T) {
		resp, err := f.client.ReplayDeadLetters(ctx, as("owner-operator", &apiv1.ReplayDeadLettersRequest{All: true, DryRun: true}))
		require.NoError(t, err)
		assert.ElementsMatch(t, f.alphaRuns, resp.Msg.GetRunIds())
		assert.Empty(t, replayed(t))
	})
	t.Run("operator replays the team's runs with the current definition", func(t *testing.T) {
		resp, err := f.client.ReplayDeadLetters(ctx, as("owner-operator", &apiv1.ReplayDeadLettersRequest{All: true}))
		require.NoError(t, err)
		assert.ElementsMatch(t, f.alphaRuns, resp.Msg.GetRunIds())
		assert.Equal(t, []string{gone}, resp.Msg.GetSkippedRunIds(), "the deleted job's run is skipped")
		got := replayed(t)
		require.Len(t, got, len(f.alphaRuns), "one due entry per alpha run and none of beta's")
		for _, id := range f.alphaRuns {
			run := got[id]
			require.NotNil(t, run, "replayed %s", id)
			assert.Equal(t, uint32(4), run.GetAttempt(), "the replay is a new attempt after the dead run's three")
			assert.Equal(t, uint32(3), run.GetAttemptsBeforeReplay())
			assert.Equal(t, sundialv1.RunOrigin_RUN_ORIGIN_REPLAY, run.GetOrigin())
			assert.Equal(t, "current", string(run.GetPayload()), "the current definition's payload")
			assert.Equal(t, int64(2), run.GetDefinitionOffset())
			assert.NotNil(t, run.GetTarget().GetHandler())
		}
		assert.False(t, slices.Contains(resp.Msg.GetRunIds(), f.betaRun))
	})
}
