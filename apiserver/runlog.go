package apiserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	"github.com/sundialhq/sundial/logtail"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/store"
)

// Defaults of RunServiceConfig's live tail.
const (
	DefaultTailPoll = time.Second
	DefaultMaxTails = 1024
)

const (
	// tailChunks is the most chunks one read of a tail takes; a full read
	// is followed by the next at once.
	tailChunks = 64
	// tailHistoryEvery is how many polls of an attempt that has no stream
	// pass between two reads of the history, which says whether it ended
	// without shipping anything (or long ago).
	tailHistoryEvery = 5
	// tailScan is how many of a job's newest attempts a tail searches in
	// the history for its attempt.
	tailScan = 1000
)

// LogTails reads the running attempts' logs the runners ship;
// logtail.Reader satisfies it.
type LogTails interface {
	Read(ctx context.Context, jobID, runID string, attempt uint32, offset string, limit int64) (logtail.Batch, error)
}

// TailRunLog streams the log of one attempt of a run while it runs, from
// the request's offset, and ends with the attempt. The caller must see
// the run (its team, any role); another team's run is NOT_FOUND. The
// first message names the attempt and carries no line: the tail is open.
// An attempt whose runner shipped nothing (it logged nothing, or ended
// longer ago than Redis keeps a log) ends as the history says, with the
// lines the history kept.
func (s *RunService) TailRunLog(ctx context.Context, req *connect.Request[apiv1.TailRunLogRequest], stream *connect.ServerStream[apiv1.TailRunLogResponse]) error {
	p, err := requireCaller(ctx)
	if err != nil {
		return err
	}
	m := req.Msg
	runID := m.GetRunId()
	if runID == "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("run_id: required"))
	}
	if err := logtail.CheckOffset(m.GetOffset()); err != nil {
		return connect.NewError(connect.CodeInvalidArgument, err)
	}
	target, err := s.resolveRun(ctx, runID)
	if err != nil {
		s.cfg.Logger.ErrorContext(ctx, "tail run log: resolve", "run_id", runID, "err", err)
		return internalError("tail run log")
	}
	if !target.found || !p.CanSee(target.team) {
		return notVisible("run", runID)
	}
	if s.cfg.Logs == nil {
		return connect.NewError(connect.CodeFailedPrecondition, errors.New("tail run log: this API has no Redis (--redis-addr), where the runners ship the live logs; GetRun has the log of an ended attempt"))
	}
	if s.tails.Add(1) > int64(s.cfg.MaxTails) {
		s.tails.Add(-1)
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("tail run log: %d tails are open, the most this API serves; try again later", s.cfg.MaxTails))
	}
	defer s.tails.Add(-1)
	t := runTail{s: s, stream: stream, jobID: target.jobID, runID: runID, attempt: m.GetAttempt(), offset: m.GetOffset()}
	return t.run(ctx)
}

// runTail is one TailRunLog stream.
type runTail struct {
	s       *RunService
	stream  *connect.ServerStream[apiv1.TailRunLogResponse]
	jobID   string
	runID   string
	attempt uint32
	// offset is where the next read starts: the last chunk sent.
	offset string
}

func (t *runTail) run(ctx context.Context) error {
	if t.attempt == 0 {
		rec, found, err := t.s.attemptRecord(ctx, t.jobID, t.runID, 0)
		if err != nil {
			return t.fail(ctx, "history", err)
		}
		t.attempt = 1
		if found {
			t.attempt = uint32(rec.Attempt)
		}
	}
	if err := t.stream.Send(&apiv1.TailRunLogResponse{Attempt: t.attempt}); err != nil {
		return err
	}
	wait := time.NewTimer(t.s.cfg.TailPoll)
	defer wait.Stop()
	for polls := 0; ; polls++ {
		b, err := t.s.cfg.Logs.Read(ctx, t.jobID, t.runID, t.attempt, t.offset, tailChunks)
		if err != nil {
			return t.fail(ctx, "read", err)
		}
		for _, c := range b.Chunks {
			msg := &apiv1.TailRunLogResponse{Attempt: t.attempt, Lines: c.Lines, Offset: c.Offset, Dropped: c.Dropped, Ended: c.End}
			if err := t.stream.Send(msg); err != nil {
				return err
			}
			t.offset = c.Offset
			if c.End {
				return nil
			}
		}
		if len(b.Chunks) == tailChunks {
			continue
		}
		if !b.Exists && polls%tailHistoryEvery == 0 {
			ended, err := t.endFromHistory(ctx)
			if err != nil || ended {
				return err
			}
		}
		wait.Reset(t.s.cfg.TailPoll)
		select {
		case <-ctx.Done():
			return nil
		case <-wait.C:
		}
	}
}

// endFromHistory ends the stream when the history says the attempt
// ended, with the lines the history kept if none was sent.
func (t *runTail) endFromHistory(ctx context.Context) (bool, error) {
	rec, found, err := t.s.attemptRecord(ctx, t.jobID, t.runID, t.attempt)
	if err != nil {
		return false, t.fail(ctx, "history", err)
	}
	if !found || rec.State == store.StateScheduled || rec.State == store.StateRunning {
		return false, nil
	}
	msg := &apiv1.TailRunLogResponse{Attempt: t.attempt, Ended: true, State: attemptState(rec.State)}
	if t.offset == "" {
		msg.Lines = rec.Log
	}
	return true, t.stream.Send(msg)
}

// fail answers a backend failure, and logs it unless the caller left
// (which ends the reads too).
func (t *runTail) fail(ctx context.Context, what string, err error) error {
	if ctx.Err() == nil {
		t.s.cfg.Logger.ErrorContext(ctx, "tail run log: "+what, "run_id", t.runID, "attempt", t.attempt, "err", err)
	}
	return internalError("tail run log")
}

// attemptRecord returns the history's record of one attempt of a run
// (attempt 0: its latest) among the job's newest tailScan attempts.
func (s *RunService) attemptRecord(ctx context.Context, jobID, runID string, attempt uint32) (store.RunRecord, bool, error) {
	recs, err := s.cfg.History.ListRuns(ctx, jobID, min(s.cfg.Scan, tailScan))
	if err != nil {
		return store.RunRecord{}, false, err
	}
	for _, r := range recs { // newest attempt first
		if r.RunID == runID && (attempt == 0 || uint32(r.Attempt) == attempt) {
			return r, true, nil
		}
	}
	return store.RunRecord{}, false, nil
}
