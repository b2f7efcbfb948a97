package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/logtail"
	"github.com/sundialhq/sundial/logtail/logtailtest"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/worker"
)

func (s *stack) runs(token string) apiv1connect.RunServiceClient {
	return apiv1connect.NewRunServiceClient(http.DefaultClient, s.apiURL, connect.WithInterceptors(apiserver.BearerToken(token)))
}

// handlerJob is a job of team whose target is the handler.
func handlerJob(team, id, handler string) *sundialv1.JobSpec {
	return &sundialv1.JobSpec{Id: id, OwnerTeam: team,
		Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: handler}}}}
}

// pollTask polls as workerID of the caller's team for handler until the
// gateway gives it a task.
func pollTask(t *testing.T, ctx context.Context, c apiv1connect.WorkerServiceClient, workerID, handler string) *apiv1.WorkerTask {
	t.Helper()
	var task *apiv1.WorkerTask
	require.Eventually(t, func() bool {
		res, err := c.Poll(ctx, connect.NewRequest(&apiv1.PollRequest{WorkerId: workerID, Handlers: []string{handler}, Wait: durationpb.New(time.Second)}))
		require.NoError(t, err)
		if len(res.Msg.GetTasks()) == 0 {
			return false
		}
		task = res.Msg.GetTasks()[0]
		return true
	}, waitFor, time.Millisecond)
	return task
}

// keepAlive heartbeats the task every half second until the test ends, so
// that it stays held however slow the machine is.
func keepAlive(t *testing.T, c apiv1connect.WorkerServiceClient, token string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				_, _ = c.Heartbeat(ctx, connect.NewRequest(&apiv1.HeartbeatRequest{TaskToken: token}))
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// TestSDKWorkerLogIsTailedWhileItRuns runs a team's SDK worker on the real
// stack whose handler logs, then waits for the test: its lines reach
// TailRunLog while it waits, another team's caller gets not_found, and
// once released the tail ends with its last line, every line once; the
// final event keeps the whole log.
func TestSDKWorkerLogIsTailedWhileItRuns(t *testing.T) {
	t.Parallel()
	s := setupWith(t, stackOpts{tails: []*sundialv1.JobSpec{handlerJob("team-a", "a-tail", "a.tail")}})
	release := make(chan struct{})
	open := sync.OnceFunc(func() { close(release) })
	s.startWorker("a-1", "team-a", nil, map[string]worker.Handler{"a.tail": func(ctx context.Context, r *worker.Run) error {
		for _, l := range []string{"sdk line 1", "sdk line 2", "sdk line 3"} {
			r.Log.Info(l)
		}
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		r.Log.Info("sdk done")
		return nil
	}})
	// Before the worker's Stop, which drains the handler: a test that
	// fails early still ends.
	t.Cleanup(open)
	run := handlerRun("team-a", "a-tail", "a.tail", time.Now())
	s.produce(run)
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()

	// The handler waits for release, not closed yet: these lines came
	// while the attempt ran.
	got := logtailtest.Follow(t, ctx, s.runs("team-a:viewer"), run.GetRunId(), func(tl logtailtest.Tailed) bool { return len(tl.Lines) >= 3 })
	require.Len(t, got.Lines, 3, "the handler's lines did not reach the tail while it ran")
	for i, want := range []string{"msg=\"sdk line 1\"", "msg=\"sdk line 2\"", "msg=\"sdk line 3\""} {
		assert.Contains(t, got.Lines[i], want)
	}
	assert.False(t, got.Ended)
	logtailtest.NotFound(t, ctx, map[string]apiv1connect.RunServiceClient{"team-b:admin": s.runs("team-b:admin"), "team-b:viewer": s.runs("team-b:viewer")}, run.GetRunId())

	open()
	got = logtailtest.Follow(t, ctx, s.runs("team-a:viewer"), run.GetRunId(), logtailtest.Forever)
	assert.True(t, got.Ended, "the tail did not end with the run")
	require.Len(t, got.Lines, 4, "each line once: %q", got.Lines)
	assert.Contains(t, got.Lines[3], "msg=\"sdk done\"")
	s.events.waitState(t, run.GetRunId(), sundialv1.RunState_RUN_STATE_SUCCEEDED)
	for _, ev := range s.events.of(run.GetRunId()) {
		if ev.GetState() == sundialv1.RunState_RUN_STATE_SUCCEEDED {
			assert.Equal(t, got.Lines, ev.GetLog(), "the final event keeps the whole log")
		}
	}
}

// TestAppendLogOnTheStackTakesOnlyTheHolder: on the real stack, team b's
// token and another worker of team a append to the attempt team a's
// worker holds: both are refused, and their lines never reach the tail;
// the holder's do, and after the outcome the holder is refused too.
func TestAppendLogOnTheStackTakesOnlyTheHolder(t *testing.T) {
	t.Parallel()
	s := setupWith(t, stackOpts{tails: []*sundialv1.JobSpec{handlerJob("team-a", "a-held", "a.held")}})
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	run := handlerRun("team-a", "a-held", "a.held", time.Now())
	s.produce(run)
	a, b := s.api("team-a:operator"), s.api("team-b:operator")
	task := pollTask(t, ctx, a, "holder", "a.held")
	keepAlive(t, a, task.GetTaskToken())
	appendLog := func(c apiv1connect.WorkerServiceClient, workerID, line string) []uint32 {
		t.Helper()
		res, err := c.AppendLog(ctx, connect.NewRequest(&apiv1.AppendLogRequest{WorkerId: workerID,
			Tasks: []*apiv1.TaskLog{{TaskToken: task.GetTaskToken(), Log: &apiv1.LiveLog{Lines: []string{line}}}}}))
		require.NoError(t, err)
		return res.Msg.GetRefused()
	}
	assert.Equal(t, []uint32{0}, appendLog(b, "holder", "team b was here"), "another team appended")
	assert.Equal(t, []uint32{0}, appendLog(a, "other", "another worker was here"), "a worker that does not hold the attempt appended")
	assert.Empty(t, appendLog(a, "holder", "the holder's line"))
	got := logtailtest.Follow(t, ctx, s.runs("team-a:viewer"), run.GetRunId(), func(tl logtailtest.Tailed) bool { return len(tl.Lines) > 0 })
	assert.Equal(t, []string{"the holder's line"}, got.Lines)

	_, err := a.Complete(ctx, connect.NewRequest(&apiv1.CompleteRequest{TaskToken: task.GetTaskToken(), Outcome: apiv1.CompleteRequest_OUTCOME_SUCCESS,
		LogLines: []string{"the holder's line", "done"}, LiveLog: &apiv1.LiveLog{Lines: []string{"done"}}}))
	require.NoError(t, err)
	got = logtailtest.Follow(t, ctx, s.runs("team-a:viewer"), run.GetRunId(), logtailtest.Forever)
	assert.True(t, got.Ended)
	assert.Equal(t, []string{"the holder's line", "done"}, got.Lines)
	assert.Equal(t, []uint32{0}, appendLog(a, "holder", "after the end"), "an ended attempt took lines")
}

// TestAppendLogBoundsOnTheStack: a worker that sends 100 MB of lines for
// the attempt it holds costs the gateway's Redis at most the attempt's
// bound: the tail receives at most AttemptBytes, Redis holds about as
// much, and every line left out is counted.
func TestAppendLogBoundsOnTheStack(t *testing.T) {
	t.Parallel()
	s := setupWith(t, stackOpts{tails: []*sundialv1.JobSpec{handlerJob("team-a", "a-flood", "a.flood")}})
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	run := handlerRun("team-a", "a-flood", "a.flood", time.Now())
	s.produce(run)
	a := s.api("team-a:operator")
	task := pollTask(t, ctx, a, "flood", "a.flood")
	keepAlive(t, a, task.GetTaskToken())

	// 34 calls of 30,000 lines of 100 bytes (each call within the API's
	// 4 MiB request bound): 102 MB.
	const calls, perCall = 34, 30_000
	line := strings.Repeat("x", 99)
	lines := make([]string, perCall)
	for i := range lines {
		lines[i] = line
	}
	for range calls {
		res, err := a.AppendLog(ctx, connect.NewRequest(&apiv1.AppendLogRequest{WorkerId: "flood",
			Tasks: []*apiv1.TaskLog{{TaskToken: task.GetTaskToken(), Log: &apiv1.LiveLog{Lines: lines}}}}))
		require.NoError(t, err)
		require.Empty(t, res.Msg.GetRefused())
	}
	got := logtailtest.Follow(t, ctx, s.runs("team-a:viewer"), run.GetRunId(), func(tl logtailtest.Tailed) bool { return tl.Dropped > 0 })
	require.Positive(t, got.Dropped)
	key := logtail.Key(s.runnerKeys, run.GetJobId(), run.GetRunId(), 1)
	mem, err := s.redis.MemoryUsage(ctx, key).Result()
	require.NoError(t, err)
	assert.Less(t, mem, int64(2*logtail.DefaultAttemptBytes), "Redis holds %d bytes of a 100 MB log", mem)

	_, err = a.Complete(ctx, connect.NewRequest(&apiv1.CompleteRequest{TaskToken: task.GetTaskToken(), Outcome: apiv1.CompleteRequest_OUTCOME_SUCCESS,
		LogLines: []string{"done"}, LiveLog: &apiv1.LiveLog{Lines: []string{"done"}}}))
	require.NoError(t, err)
	got = logtailtest.Follow(t, ctx, s.runs("team-a:viewer"), run.GetRunId(), logtailtest.Forever)
	assert.True(t, got.Ended)
	assert.LessOrEqual(t, got.Bytes, logtail.DefaultAttemptBytes, "the tail ships at most AttemptBytes of an attempt")
	assert.Equal(t, int64(calls*perCall+1), int64(len(got.Lines))+got.Dropped, "every line is either shipped or counted as left out")
}
