package gateway

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/checkpoint"
	"github.com/sundialhq/sundial/jobspec"
	"github.com/sundialhq/sundial/logtail"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	"github.com/sundialhq/sundial/runner/target"
)

// Service is the WorkerService of the API: the workers' side of a Broker.
type Service struct{ b *Broker }

// NewService returns the WorkerService of b.
func NewService(b *Broker) *Service { return &Service{b: b} }

// compressMinBytes is the smallest answer the WorkerService compresses.
// Its answers are mostly a few bytes (a Complete's, a Heartbeat's, a Poll
// of one small task), and a gzip writer's reset for each cost the gateway
// more CPU than anything else it does per attempt.
const compressMinBytes = 4 << 10

// Service returns the API server's Service of s.
func (s *Service) Service() apiserver.Service {
	svc := apiserver.ConnectService(apiv1connect.NewWorkerServiceHandler, apiv1connect.WorkerServiceHandler(s))
	return func(opts ...connect.HandlerOption) apiserver.Handler {
		return svc(append(opts, connect.WithCompressMinBytes(compressMinBytes))...)
	}
}

// teamOf is the team the caller's token acts for: a worker acts for one
// team, with the operator role at least (it runs the team's runs).
func teamOf(ctx context.Context) (string, error) {
	p, ok := auth.FromContext(ctx)
	switch {
	case !ok:
		return "", connect.NewError(connect.CodeUnauthenticated, errors.New("worker: a team token is required"))
	case p.Team == "":
		return "", connect.NewError(connect.CodePermissionDenied, errors.New("worker: the token acts for no team; a worker uses its team's token"))
	case !p.Allows(p.Team, auth.RoleOperator):
		return "", connect.NewError(connect.CodePermissionDenied, fmt.Errorf("worker: team %s: the token's role is below operator", p.Team))
	}
	return p.Team, nil
}

func notFound(err error) error {
	if errors.Is(err, ErrUnknownTask) {
		return connect.NewError(connect.CodeNotFound, ErrUnknownTask)
	}
	return err
}

// Poll gives the caller's team's queued attempts of its handlers, of the
// jobs of the pool it names.
func (s *Service) Poll(ctx context.Context, req *connect.Request[apiv1.PollRequest]) (*connect.Response[apiv1.PollResponse], error) {
	team, err := teamOf(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	var bad []string
	if strings.TrimSpace(m.GetWorkerId()) == "" {
		bad = append(bad, "worker_id: is required")
	}
	if len(m.GetHandlers()) == 0 {
		bad = append(bad, "handlers: at least one is required")
	}
	pool := jobspec.PoolOf(m.GetPool())
	if why := jobspec.CheckPool(pool); why != "" {
		bad = append(bad, "pool: "+why)
	}
	if len(bad) > 0 {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("poll: "+strings.Join(bad, "; ")))
	}
	// The outcomes the worker carried are taken first, as its Completes
	// would have been: their attempts end before this Poll waits.
	for _, c := range m.GetCompletions() {
		s.takeCarried(team, m.GetWorkerId(), c)
	}
	tasks := s.b.poll(ctx, team, pool, m.GetWorkerId(), m.GetHandlers(), int(min(m.GetMaxTasks(), 64)), m.GetWait().AsDuration())
	out := &apiv1.PollResponse{HeartbeatInterval: durationpb.New(s.b.cfg.HeartbeatInterval), TakesCompletions: true, LogTail: logTailProto(s.b.cfg.LogTail)}
	for _, t := range tasks {
		out.Tasks = append(out.Tasks, taskProto(ctx, t))
	}
	return connect.NewResponse(out), nil
}

func taskProto(ctx context.Context, t *Task) *apiv1.WorkerTask {
	run := t.Req.Run
	wt := &apiv1.WorkerTask{
		TaskToken: t.Token, RunId: run.GetRunId(), JobId: run.GetJobId(), Attempt: run.GetAttempt(),
		FencingToken: t.Req.FencingToken, Handler: t.Handler, Payload: run.GetPayload(),
		Replay:    run.GetAttempt() > 1,
		DueTime:   run.GetDueTime(),
		BaseRunId: run.GetBaseRunId(), ShardIndex: run.GetShardIndex(), ShardCount: run.GetShardCount(),
	}
	if !t.Deadline.IsZero() {
		wt.Deadline = timestamppb.New(t.Deadline)
	}
	if t.Checkpoints != nil {
		if c, ok, err := t.Checkpoints.Last(ctx); err == nil && ok {
			wt.Checkpoint, wt.HasCheckpoint = c.Data, true
			wt.Replay = true
		}
	}
	return wt
}

// Heartbeat keeps the caller's task alive and may save its checkpoint.
func (s *Service) Heartbeat(ctx context.Context, req *connect.Request[apiv1.HeartbeatRequest]) (*connect.Response[apiv1.HeartbeatResponse], error) {
	team, err := teamOf(ctx)
	if err != nil {
		return nil, err
	}
	t, beat, err := s.b.heartbeat(team, req.Msg.GetTaskToken())
	if err != nil {
		return nil, notFound(err)
	}
	out := &apiv1.HeartbeatResponse{Stop: beat.Stop != "", Reason: beat.Stop}
	if req.Msg.GetHasCheckpoint() && beat.Stop == "" {
		if t.Checkpoints == nil {
			out.CheckpointError = "this installation keeps no checkpoints"
		} else {
			err := t.Checkpoints.Save(ctx, req.Msg.GetCheckpoint())
			switch {
			case errors.Is(err, checkpoint.ErrSuspended):
				out.Suspended = true
			case err != nil:
				out.CheckpointError = err.Error()
			}
		}
	}
	return connect.NewResponse(out), nil
}

// Complete takes the outcome of the caller's task.
func (s *Service) Complete(ctx context.Context, req *connect.Request[apiv1.CompleteRequest]) (*connect.Response[apiv1.CompleteResponse], error) {
	team, err := teamOf(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	out, err := outcomeOf(m)
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	stale, err := s.b.complete(team, m.GetTaskToken(), out)
	if err != nil {
		return nil, notFound(err)
	}
	return connect.NewResponse(&apiv1.CompleteResponse{Stale: stale}), nil
}

// maxAppendTasks bounds the entries of one AppendLog: far above the
// attempts one worker holds at once.
const maxAppendTasks = 1024

// AppendLog hands the lines the caller's running attempts logged to their
// live tails.
func (s *Service) AppendLog(ctx context.Context, req *connect.Request[apiv1.AppendLogRequest]) (*connect.Response[apiv1.AppendLogResponse], error) {
	team, err := teamOf(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	var bad []string
	if strings.TrimSpace(m.GetWorkerId()) == "" {
		bad = append(bad, "worker_id: is required")
	}
	if n := len(m.GetTasks()); n > maxAppendTasks {
		bad = append(bad, fmt.Sprintf("tasks: %d entries, at most %d a call", n, maxAppendTasks))
	}
	if len(bad) > 0 {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("append log: "+strings.Join(bad, "; ")))
	}
	out := &apiv1.AppendLogResponse{}
	for i, tl := range m.GetTasks() {
		if err := s.b.appendLog(team, m.GetWorkerId(), tl.GetTaskToken(), liveOf(tl.GetLog())); err != nil {
			out.Refused = append(out.Refused, uint32(i)) //nolint:gosec // i < maxAppendTasks
		}
	}
	return connect.NewResponse(out), nil
}

// liveOf is the Live a LiveLog carries; a count of dropped lines past
// what an int64 holds is the most it holds.
func liveOf(l *apiv1.LiveLog) Live {
	return Live{Lines: l.GetLines(), Dropped: int64(min(l.GetDropped(), math.MaxInt64))} //nolint:gosec // bounded just before
}

// logTailProto tells the workers the bounds of their attempts' live tails.
func logTailProto(b logtail.Bounds) *apiv1.LogTail {
	return &apiv1.LogTail{Every: durationpb.New(b.Every),
		ChunkBytes: uint32(min(int64(b.ChunkBytes), math.MaxUint32)), AttemptBytes: uint32(min(int64(b.AttemptBytes), math.MaxUint32))} //nolint:gosec // bounded just before
}

// errNoOutcome refuses a completion that does not say how the attempt
// ended.
var errNoOutcome = errors.New("complete: outcome: is required (SUCCESS, FAILURE or SUSPEND)")

// outcomeOf is the Outcome a completion gives.
func outcomeOf(m *apiv1.CompleteRequest) (Outcome, error) {
	out := Outcome{Lines: m.GetLogLines()}
	if l := m.GetLiveLog(); l != nil {
		live := liveOf(l)
		out.Live = &live
	}
	switch m.GetOutcome() {
	case apiv1.CompleteRequest_OUTCOME_SUCCESS:
	case apiv1.CompleteRequest_OUTCOME_FAILURE:
		code := m.GetErrorCode()
		if code == "" {
			code = target.CodeHandler
		}
		out.Err = &target.Error{Code: code, Message: m.GetErrorMessage(), Retryable: m.GetRetryable()}
	case apiv1.CompleteRequest_OUTCOME_SUSPEND:
		out.Suspend = true
	default:
		return Outcome{}, errNoOutcome
	}
	return out, nil
}

// takeCarried takes an outcome a worker carried on its Poll, as Complete
// takes one. One that Complete would refuse (no outcome, a task unknown to
// the caller's team) is dropped and logged: the worker does not wait for
// an answer, and the attempt ends as it would without an outcome.
func (s *Service) takeCarried(team, workerID string, m *apiv1.CompleteRequest) {
	out, err := outcomeOf(m)
	if err == nil {
		_, err = s.b.complete(team, m.GetTaskToken(), out)
	}
	switch {
	case errors.Is(err, ErrUnknownTask):
		// Most often an outcome given again after a Poll that carried it
		// failed on its way back: taken already.
		s.b.cfg.Logger.Debug("an outcome carried on a poll names no task of the team; dropped", "team", team, "worker_id", workerID)
	case err != nil:
		s.b.cfg.Logger.Warn("an outcome carried on a poll is dropped", "team", team, "worker_id", workerID, "err", err)
	}
}
