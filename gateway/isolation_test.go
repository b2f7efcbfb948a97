package gateway_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sundialhq/sundial/apiserver"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

func (s *stack) api(token string) apiv1connect.WorkerServiceClient {
	return apiv1connect.NewWorkerServiceClient(http.DefaultClient, s.apiURL, connect.WithInterceptors(apiserver.BearerToken(token)))
}

// TestTeamTokenCannotTouchAnotherTeamsTask: team a's token, polling for
// team b's handler the whole time, receives nothing of team b; given team
// b's task token it can neither heartbeat nor complete the task, and the
// answer is the one an unknown token gets.
func TestTeamTokenCannotTouchAnotherTeamsTask(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, b := s.api("team-a:admin"), s.api("team-b:operator")

	// Team a polls for b.work throughout: it must never get team b's run.
	stolen := make(chan *apiv1.WorkerTask, 1)
	pollDone := make(chan struct{})
	go func() {
		defer close(pollDone)
		for ctx.Err() == nil {
			res, err := a.Poll(ctx, connect.NewRequest(&apiv1.PollRequest{WorkerId: "thief", Handlers: []string{"b.work"}, Wait: durationpb.New(time.Second)}))
			if err == nil && len(res.Msg.GetTasks()) > 0 {
				stolen <- res.Msg.GetTasks()[0]
				return
			}
		}
	}()
	run := handlerRun("team-b", "b-job", "b.work", time.Now())
	s.produce(run)
	task := pollTask(t, ctx, b, "b-1", "b.work")
	require.Equal(t, run.GetRunId(), task.GetRunId())
	require.Positive(t, task.GetFencingToken())
	require.False(t, task.GetReplay())

	_, err := a.Heartbeat(ctx, connect.NewRequest(&apiv1.HeartbeatRequest{TaskToken: task.GetTaskToken()}))
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "team a heartbeats team b's task: %v", err)
	_, err = a.Complete(ctx, connect.NewRequest(&apiv1.CompleteRequest{TaskToken: task.GetTaskToken(), Outcome: apiv1.CompleteRequest_OUTCOME_FAILURE, ErrorCode: "sabotage"}))
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "team a completes team b's task: %v", err)
	_, unknownErr := a.Heartbeat(ctx, connect.NewRequest(&apiv1.HeartbeatRequest{TaskToken: "no-such-token"}))
	require.Equal(t, connect.CodeOf(unknownErr), connect.CodeOf(err))
	require.Equal(t, unknownErr.Error(), err.Error(), "the refusal tells another team's task from an unknown one")
	_, err = s.api("admin").Poll(ctx, connect.NewRequest(&apiv1.PollRequest{WorkerId: "x", Handlers: []string{"b.work"}}))
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "a token of no team polls: %v", err)
	_, err = s.api("team-b:viewer").Poll(ctx, connect.NewRequest(&apiv1.PollRequest{WorkerId: "x", Handlers: []string{"b.work"}}))
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "a viewer polls: %v", err)

	hb, err := b.Heartbeat(ctx, connect.NewRequest(&apiv1.HeartbeatRequest{TaskToken: task.GetTaskToken()}))
	require.NoError(t, err)
	require.False(t, hb.Msg.GetStop())
	_, err = b.Complete(ctx, connect.NewRequest(&apiv1.CompleteRequest{TaskToken: task.GetTaskToken(), Outcome: apiv1.CompleteRequest_OUTCOME_SUCCESS, LogLines: []string{"done by b"}}))
	require.NoError(t, err)
	s.events.waitState(t, run.GetRunId(), sundialv1.RunState_RUN_STATE_SUCCEEDED)
	cancel()
	<-pollDone
	select {
	case st := <-stolen:
		t.Fatalf("team a received team b's task %s", st.GetRunId())
	default:
	}
	var lines []string
	for _, ev := range s.events.of(run.GetRunId()) {
		if ev.GetState() == sundialv1.RunState_RUN_STATE_SUCCEEDED {
			lines = ev.GetLog()
		}
	}
	require.Contains(t, lines, "done by b")
}
