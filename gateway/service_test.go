package gateway

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sundialhq/sundial/auth"
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
