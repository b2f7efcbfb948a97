package operator

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/checkpoint"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner"
	"github.com/sundialhq/sundial/store"
)

// ErrNotSuspended: ResumeRun found the run not suspended (never, or
// already resumed).
var ErrNotSuspended = checkpoint.ErrNotSuspended

// SuspendOptions are Suspend's options.
type SuspendOptions struct {
	// Wait: return only once the run is SUSPENDED, or ended otherwise.
	Wait bool
}

// SuspendResult is the outcome of Suspend.
type SuspendResult struct {
	// Event is, with Wait, the run's SUSPENDED event, or its terminal
	// event when it ended before its next checkpoint.
	Event *sundialv1.RunEvent
}

// Suspend asks the runner executing runID of job jobID to suspend it: the
// run stops right after its next checkpoint, its lease is released, and it
// becomes SUSPENDED until ResumeRun. A run whose handler never saves a
// checkpoint runs to its end. A run that holds no lease is answered
// ErrNotRunning and nothing is marked.
func (o *Operator) Suspend(ctx context.Context, jobID, runID string, opts SuspendOptions) (SuspendResult, error) {
	if err := o.need("suspend", map[string]bool{"Leases": o.cfg.Leases != nil, "Redis": o.cfg.Redis != nil, "RunnerKeyPrefix": o.cfg.RunnerKeyPrefix != ""}); err != nil {
		return SuspendResult{}, err
	}
	running, err := o.cfg.Leases.Holding(ctx, jobID, runID)
	if err != nil {
		return SuspendResult{}, fmt.Errorf("suspend run %s: %w", runID, err)
	}
	if !running {
		return SuspendResult{}, fmt.Errorf("run %s of job %q: %w", runID, jobID, ErrNotRunning)
	}
	var f *follower
	if opts.Wait {
		if f, err = o.follow(); err != nil {
			return SuspendResult{}, err
		}
		defer f.close()
	}
	if err := runner.SignalSuspend(ctx, o.cfg.Redis, o.cfg.RunnerKeyPrefix, jobID, runID); err != nil {
		return SuspendResult{}, err
	}
	o.record(ctx, Action{Kind: "suspend", JobID: jobID, RunID: runID})
	if f == nil {
		return SuspendResult{}, nil
	}
	ev, err := f.waitState(ctx, runID, func(s sundialv1.RunState) bool {
		return s == sundialv1.RunState_RUN_STATE_SUSPENDED || terminal(s)
	})
	return SuspendResult{Event: ev}, err
}

// ResumeRun dispatches the suspended run runID again, under the same run
// id and attempt: its suspend marker is deleted, a due entry carrying the
// run is enqueued for now, and the suspension is cleared. The handler's
// LastCheckpoint returns the checkpoint the run stopped at. It returns the
// run's job id, or ErrNotSuspended.
//
// The entry is enqueued before the suspension is cleared, so a failure in
// between leaves a run that a second ResumeRun dispatches again; two
// deliveries of one run id execute once at a time (the lease is per run).
func (o *Operator) ResumeRun(ctx context.Context, runID string) (string, error) {
	if err := o.need("resume run", map[string]bool{"Checkpoints": o.cfg.Checkpoints != nil, "Enqueuer": o.cfg.Enqueuer != nil,
		"Redis": o.cfg.Redis != nil, "RunnerKeyPrefix": o.cfg.RunnerKeyPrefix != ""}); err != nil {
		return "", err
	}
	sp, ok, err := o.cfg.Checkpoints.Suspended(ctx, runID)
	if err != nil {
		return "", fmt.Errorf("resume run %s: %w", runID, err)
	}
	if !ok {
		return "", fmt.Errorf("resume run %s: %w", runID, ErrNotSuspended)
	}
	run := &sundialv1.Run{}
	if err := proto.Unmarshal(sp.Run, run); err != nil {
		return "", fmt.Errorf("resume run %s: the stored run does not decode: %w", runID, err)
	}
	if err := runner.ClearSuspend(ctx, o.cfg.Redis, o.cfg.RunnerKeyPrefix, sp.JobID, runID); err != nil {
		return "", fmt.Errorf("resume run %s: %w", runID, err)
	}
	due := store.Truncate(o.cfg.Now())
	run.AttemptDueTime = timestamppb.New(due)
	run.DispatchedAt = nil
	payload, err := proto.Marshal(run)
	if err != nil {
		return "", fmt.Errorf("resume run %s: encode the run: %w", runID, err)
	}
	entry := store.DueEntry{Due: due, JobID: sp.JobID, Kind: store.KindRetry, RunID: runID,
		Attempt: int(run.GetAttempt()), Revision: max(run.GetDefinitionOffset(), 0), Payload: payload}
	if err := o.cfg.Enqueuer.Enqueue(ctx, entry); err != nil {
		return "", fmt.Errorf("resume run %s: enqueue: %w", runID, err)
	}
	if err := o.cfg.Checkpoints.ClearSuspended(ctx, sp); err != nil && !errors.Is(err, checkpoint.ErrNotSuspended) {
		return "", fmt.Errorf("resume run %s: the run is dispatched, but: %w", runID, err)
	}
	o.record(ctx, Action{Kind: "resume-run", JobID: sp.JobID, RunID: runID})
	return sp.JobID, nil
}
