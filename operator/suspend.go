package operator

import (
	"context"
	"fmt"

	"github.com/sundialhq/sundial/checkpoint"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner"
)

// ErrNotSuspended is what ResumeRun returns when the run is not suspended
// (never was, or was already resumed).
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
		if f, err = o.follow(ctx); err != nil {
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
// id and attempt (runner.Resume): the handler's LastCheckpoint returns the
// checkpoint the run stopped at. It returns the run's job id, or
// ErrNotSuspended.
func (o *Operator) ResumeRun(ctx context.Context, runID string) (string, error) {
	if err := o.need("resume run", map[string]bool{"Checkpoints": o.cfg.Checkpoints != nil, "Enqueuer": o.cfg.Enqueuer != nil,
		"Redis": o.cfg.Redis != nil, "RunnerKeyPrefix": o.cfg.RunnerKeyPrefix != ""}); err != nil {
		return "", err
	}
	job, err := runner.Resume(ctx, runner.ResumeConfig{Checkpoints: o.cfg.Checkpoints, Enqueuer: o.cfg.Enqueuer,
		Redis: o.cfg.Redis, KeyPrefix: o.cfg.RunnerKeyPrefix, Now: o.cfg.Now}, runID)
	if err != nil {
		return "", err
	}
	o.record(ctx, Action{Kind: "resume-run", JobID: job, RunID: runID})
	return job, nil
}
