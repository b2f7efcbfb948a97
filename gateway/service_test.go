package gateway

import (
	"context"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/logtail"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/runner/target"
)

// TestPollTakesTheOutcomesItCarries: the outcomes a Poll carries end their
// attempts as Completes would, before the Poll waits; one the caller's
// team cannot complete (another team's task, no outcome) is dropped and
// leaves its attempt running; every answer says the gateway takes them.
func TestPollTakesTheOutcomesItCarries(t *testing.T) {
	t.Parallel()
	b, _ := setup(t)
	svc := NewService(b)
	teamA := auth.NewContext(t.Context(), auth.Principal{Subject: "token:a", Team: "team-a", Role: auth.RoleOperator})
	teamB := auth.NewContext(t.Context(), auth.Principal{Subject: "token:b", Team: "team-b", Role: auth.RoleOperator})
	poll := func(ctx context.Context, worker string, max uint32, carried ...*apiv1.CompleteRequest) *apiv1.PollResponse {
		t.Helper()
		res, err := svc.Poll(ctx, connect.NewRequest(&apiv1.PollRequest{WorkerId: worker, Handlers: []string{"work"}, MaxTasks: max,
			Wait: durationpb.New(time.Millisecond), Completions: carried}))
		require.NoError(t, err)
		return res.Msg
	}
	assert.True(t, poll(teamA, "a-1", 1).GetTakesCompletions())
	assert.True(t, poll(teamB, "b-1", 1).GetTakesCompletions())

	results := make(chan error, 3)
	for _, r := range []target.Request{req("team-a", "work", "a@1"), req("team-a", "work", "a@2"), req("team-b", "work", "b@1")} {
		go func() { results <- b.HandleAttempt(t.Context(), r) }()
	}
	waitQueued(t, b, "team-b", "work")
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.queues[key{"team-a", "default", "work"}]) == 2
	}, time.Minute, time.Millisecond)
	tasksA := poll(teamA, "a-1", 2).GetTasks()
	require.Len(t, tasksA, 2)
	tasksB := poll(teamB, "b-1", 1).GetTasks()
	require.Len(t, tasksB, 1)

	// Team a carries a success, a failure, team b's task and an outcome
	// of no kind.
	poll(teamA, "a-1", 1,
		&apiv1.CompleteRequest{TaskToken: tasksA[0].GetTaskToken(), Outcome: apiv1.CompleteRequest_OUTCOME_SUCCESS},
		&apiv1.CompleteRequest{TaskToken: tasksA[1].GetTaskToken(), Outcome: apiv1.CompleteRequest_OUTCOME_FAILURE, ErrorCode: "boom", Retryable: true},
		&apiv1.CompleteRequest{TaskToken: tasksB[0].GetTaskToken(), Outcome: apiv1.CompleteRequest_OUTCOME_SUCCESS},
		&apiv1.CompleteRequest{TaskToken: tasksB[0].GetTaskToken()})
	var failures []string
	for range 2 {
		if err := <-results; err != nil {
			var te *target.Error
			require.ErrorAs(t, err, &te)
			failures = append(failures, te.Code)
		}
	}
	assert.Equal(t, []string{"boom"}, failures, "one success, one failure")
	select {
	case err := <-results:
		t.Fatalf("team b's attempt ended on team a's poll: %v", err)
	default:
	}
	_, beat, err := b.heartbeat("team-b", tasksB[0].GetTaskToken())
	require.NoError(t, err, "team b's task is still held")
	assert.Empty(t, beat.Stop)
	poll(teamB, "b-1", 1, &apiv1.CompleteRequest{TaskToken: tasksB[0].GetTaskToken(), Outcome: apiv1.CompleteRequest_OUTCOME_SUCCESS})
	require.NoError(t, <-results)
}

// tailSink records what an attempt's live tail receives.
type tailSink struct {
	mu      sync.Mutex
	lines   []string
	skipped int64
}

func (s *tailSink) Line(l string) { s.mu.Lock(); defer s.mu.Unlock(); s.lines = append(s.lines, l) }
func (s *tailSink) Skipped(n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.skipped += n
}

func (s *tailSink) got() ([]string, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.lines), s.skipped
}

// TestAppendLogTakesOnlyTheHoldersLines: AppendLog hands a task's lines to
// its attempt's live tail only for the worker of the task's team that
// holds it, while its attempt runs; another team's token, another worker
// of the team, a task still queued, an ended attempt and an unknown token
// are all refused alike, and their lines reach no tail. The outcome then
// gives the tail only the lines it had not received, and keeps the final
// log for history.
func TestAppendLogTakesOnlyTheHoldersLines(t *testing.T) {
	t.Parallel()
	b, _ := setup(t)
	svc := NewService(b)
	teamA := auth.NewContext(t.Context(), auth.Principal{Subject: "token:a", Team: "team-a", Role: auth.RoleOperator})
	teamB := auth.NewContext(t.Context(), auth.Principal{Subject: "token:b", Team: "team-b", Role: auth.RoleAdmin})
	viewerA := auth.NewContext(t.Context(), auth.Principal{Subject: "token:v", Team: "team-a", Role: auth.RoleViewer})
	poll := func(worker, handler string) *apiv1.PollResponse {
		t.Helper()
		res, err := svc.Poll(teamA, connect.NewRequest(&apiv1.PollRequest{WorkerId: worker, Handlers: []string{handler}, Wait: durationpb.New(time.Millisecond)}))
		require.NoError(t, err)
		return res.Msg
	}
	appendLog := func(ctx context.Context, worker string, logs ...*apiv1.TaskLog) ([]uint32, error) {
		res, err := svc.AppendLog(ctx, connect.NewRequest(&apiv1.AppendLogRequest{WorkerId: worker, Tasks: logs}))
		if err != nil {
			return nil, err
		}
		return res.Msg.GetRefused(), nil
	}
	entry := func(token string, lines ...string) *apiv1.TaskLog {
		return &apiv1.TaskLog{TaskToken: token, Log: &apiv1.LiveLog{Lines: lines}}
	}

	lt := poll("a-1", "work").GetLogTail()
	require.NotNil(t, lt, "a Poll answer tells the bounds of the live tails")
	assert.Equal(t, logtail.DefaultEvery, lt.GetEvery().AsDuration())
	assert.Equal(t, uint32(logtail.DefaultChunkBytes), lt.GetChunkBytes())
	assert.Equal(t, uint32(logtail.DefaultAttemptBytes), lt.GetAttemptBytes())
	poll("a-2", "queued")

	held, queued, ended := &tailSink{}, &tailSink{}, &tailSink{}
	results := make(chan error, 3)
	start := func(ctx context.Context, handler, runID string, sink *tailSink) target.Request {
		r := req("team-a", handler, runID)
		r.Output = &target.Output{Tail: sink}
		go func() { results <- b.HandleAttempt(ctx, r) }()
		waitQueued(t, b, "team-a", handler)
		return r
	}
	heldReq := start(t.Context(), "work", "a@1", held)
	tasks := poll("a-1", "work").GetTasks()
	require.Len(t, tasks, 1)
	token := tasks[0].GetTaskToken()
	endCtx, cancel := context.WithCancel(t.Context())
	start(endCtx, "work", "a@3", ended)
	endedTasks := poll("a-1", "work").GetTasks()
	require.Len(t, endedTasks, 1)
	cancel()
	require.ErrorIs(t, <-results, context.Canceled)
	start(t.Context(), "queued", "a@2", queued)
	b.mu.Lock()
	queuedToken := b.queues[key{"team-a", "default", "queued"}][0].Token
	b.mu.Unlock()

	// The holder's lines reach the tail, cut as the attempt's log cuts
	// them, and a dropped count past an int64's range saturates.
	refused, err := appendLog(teamA, "a-1", entry(token, "first", strings.Repeat("é", target.MaxOutputLineBytes)),
		&apiv1.TaskLog{TaskToken: token, Log: &apiv1.LiveLog{Dropped: math.MaxUint64}})
	require.NoError(t, err)
	assert.Empty(t, refused)
	lines, skipped := held.got()
	require.Len(t, lines, 2)
	assert.Equal(t, "first", lines[0])
	assert.LessOrEqual(t, len(lines[1]), target.MaxOutputLineBytes+len("…"), "a long line is cut")
	assert.Equal(t, int64(math.MaxInt64), skipped)

	// Everyone else is refused, each entry alike.
	refused, err = appendLog(teamB, "a-1", entry(token, "team b's line"))
	require.NoError(t, err)
	assert.Equal(t, []uint32{0}, refused, "another team's token appends to team a's attempt")
	refused, err = appendLog(teamA, "a-2", entry(token, "another worker's line"), entry(queuedToken, "a queued task's line"),
		entry(endedTasks[0].GetTaskToken(), "an ended attempt's line"), entry("no-such-token", "x"), entry(token, "again"))
	require.NoError(t, err)
	assert.Equal(t, []uint32{0, 1, 2, 3, 4}, refused, "a worker appends to attempts it does not hold")
	refused, err = appendLog(teamA, "a-1", entry(queuedToken, "a queued task's line"), entry(endedTasks[0].GetTaskToken(), "an ended attempt's line"))
	require.NoError(t, err)
	assert.Equal(t, []uint32{0, 1}, refused, "the holder of another task appends to a queued or ended attempt")
	_, err = appendLog(viewerA, "a-1", entry(token, "a viewer's line"))
	assert.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err))
	for _, sink := range []*tailSink{queued, ended} {
		lines, skipped := sink.got()
		assert.Empty(t, lines)
		assert.Zero(t, skipped)
	}
	lines, _ = held.got()
	assert.Len(t, lines, 2, "a refused line reached the held attempt's tail")

	// Bad calls name the field.
	_, err = appendLog(teamA, " ", entry(token, "x"))
	assert.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err))
	assert.ErrorContains(t, err, "worker_id: is required")
	many := make([]*apiv1.TaskLog, maxAppendTasks+1)
	for i := range many {
		many[i] = entry(token, "x")
	}
	_, err = appendLog(teamA, "a-1", many...)
	assert.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err))
	assert.ErrorContains(t, err, "tasks: 1025 entries, at most 1024 a call")
	lines, _ = held.got()
	assert.Len(t, lines, 2, "a refused call's lines reached the tail")

	// The outcome gives the tail the lines it had not received, and the
	// final log to history only.
	_, err = svc.Complete(teamA, connect.NewRequest(&apiv1.CompleteRequest{TaskToken: token, Outcome: apiv1.CompleteRequest_OUTCOME_SUCCESS,
		LogLines: []string{"first", "second", "last"}, LiveLog: &apiv1.LiveLog{Lines: []string{"second", "last"}, Dropped: 1}}))
	require.NoError(t, err)
	require.NoError(t, <-results)
	lines, _ = held.got()
	assert.Equal(t, []string{"second", "last"}, lines[2:])
	assert.Equal(t, []string{"first", "second", "last"}, heldReq.Output.Lines())
	refused, err = appendLog(teamA, "a-1", entry(token, "after the end"))
	require.NoError(t, err)
	assert.Equal(t, []uint32{0}, refused, "an ended attempt takes lines")
}

// TestCompleteWithoutLiveLogTailsItsLines: a worker that sent nothing
// live (an older worker, or an attempt shorter than one interval) gives
// its lines with its outcome, to the tail and to history alike.
func TestCompleteWithoutLiveLogTailsItsLines(t *testing.T) {
	t.Parallel()
	b, _ := setup(t)
	sink := &tailSink{}
	b.poll(t.Context(), "team-a", "default", "a-1", []string{"work"}, 1, time.Millisecond)
	r := req("team-a", "work", "a@1")
	r.Output = &target.Output{Tail: sink}
	results := make(chan error, 1)
	go func() { results <- b.HandleAttempt(t.Context(), r) }()
	waitQueued(t, b, "team-a", "work")
	got := b.poll(t.Context(), "team-a", "default", "a-1", []string{"work"}, 1, time.Millisecond)
	require.Len(t, got, 1)
	_, err := b.complete("team-a", got[0].Token, Outcome{Lines: []string{"one", "two"}})
	require.NoError(t, err)
	require.NoError(t, <-results)
	lines, _ := sink.got()
	assert.Equal(t, []string{"one", "two"}, lines)
	assert.Equal(t, []string{"one", "two"}, r.Output.Lines())
}
