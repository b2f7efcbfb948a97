package operator

import (
	"context"
	"fmt"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner"
)

// CancelOptions are Cancel's options.
type CancelOptions struct {
	// Wait: return only once the run's terminal event is out.
	Wait bool
}

// CancelResult is the outcome of Cancel.
type CancelResult struct {
	// Event is the run's terminal event (with Wait): CANCELLED, or
	// another state when the run ended otherwise before the signal landed.
	Event *sundialv1.RunEvent
}

// Cancel cancels the running run runID of job jobID: when the run holds a
// live lease, the runner executing it is signalled and ends the attempt
// with CANCELLED, scheduling no retry. Any later delivery or attempt of the
// run ends CANCELLED without executing (runner.SignalCancel's marker). A
// run that holds no lease (not started, finished, or waiting for its next
// attempt) is answered ErrNotRunning and nothing is sent.
func (o *Operator) Cancel(ctx context.Context, jobID, runID string, opts CancelOptions) (CancelResult, error) {
	if err := o.need("cancel", map[string]bool{"Leases": o.cfg.Leases != nil, "Redis": o.cfg.Redis != nil, "RunnerKeyPrefix": o.cfg.RunnerKeyPrefix != ""}); err != nil {
		return CancelResult{}, err
	}
	running, err := o.cfg.Leases.Holding(ctx, jobID, runID)
	if err != nil {
		return CancelResult{}, fmt.Errorf("cancel run %s: %w", runID, err)
	}
	if !running {
		return CancelResult{}, fmt.Errorf("run %s of job %q: %w", runID, jobID, ErrNotRunning)
	}
	var f *follower
	if opts.Wait {
		if f, err = o.follow(ctx); err != nil {
			return CancelResult{}, err
		}
		defer f.close()
	}
	if err := runner.SignalCancel(ctx, o.cfg.Redis, o.cfg.RunnerKeyPrefix, jobID, runID); err != nil {
		return CancelResult{}, err
	}
	// The signal is fire-and-forget: a runner whose subscription is
	// reconnecting misses it, and the run would go on. Revoking the lease
	// makes the cancel certain: the holder's next renewal fails, its Keeper
	// cancels the execution, and the marker SignalCancel set first makes
	// the attempt CANCELLED.
	if _, err := o.cfg.Leases.Revoke(ctx, jobID, runID); err != nil {
		return CancelResult{}, fmt.Errorf("cancel run %s: %w", runID, err)
	}
	o.record(ctx, Action{Kind: "cancel", JobID: jobID, RunID: runID})
	if f == nil {
		return CancelResult{}, nil
	}
	ev, err := f.waitRun(ctx, runID)
	return CancelResult{Event: ev}, err
}

// JobOfRun returns the job id a run id is made of (job id + "@" + due
// ms), or "" when it has no such form (a DAG node's run id).
func JobOfRun(runID string) string {
	for i := len(runID) - 1; i >= 0; i-- {
		if runID[i] == '@' {
			return runID[:i]
		}
	}
	return ""
}
