package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner"
	"github.com/sundialhq/sundial/runner/deadletter"
	"github.com/sundialhq/sundial/store"
)

// History reads and writes the run history (store.Store's ListRuns and
// RecordRun).
type History interface {
	ListRuns(ctx context.Context, jobID string, limit int) ([]store.RunRecord, error)
	RecordRun(ctx context.Context, rec store.RunRecord) error
}

// ErrNotRetryable means the run is not in a state a retry may follow (it is
// scheduled, running, suspended, succeeded or skipped).
var ErrNotRetryable = errors.New("not retryable")

// retryScan is how many of a job's newest attempts Retry reads to find the
// run's.
const retryScan = 1000

// RetryResult is the outcome of Retry.
type RetryResult struct {
	JobID string
	// Attempt is the new attempt's number: one after the run's last.
	Attempt int
}

// RetryDecision is whether a run whose newest attempt is last may be
// retried, and why not.
func RetryDecision(last store.RunRecord) error {
	switch last.State {
	case store.StateFailed, store.StateCancelled:
		return nil
	case store.StateScheduled:
		return fmt.Errorf("run %s: attempt %d is scheduled: %w; only a failed, timed-out or cancelled run is", last.RunID, last.Attempt, ErrNotRetryable)
	}
	return fmt.Errorf("run %s: attempt %d is %s: %w; only a failed, timed-out or cancelled run is", last.RunID, last.Attempt, last.State, ErrNotRetryable)
}

// Retry runs runID again, as a new attempt after its last one, with its
// job's current definition (the rule of a dead-letter replay,
// deadletter.WithDefinition): target, payload, timeout, retry policy and
// the rest come from the definition in force, and the run keeps its run id
// (the downstream's idempotency key) and due time. Only a run whose newest
// attempt failed, timed out or was cancelled is retried; any other is
// answered ErrNotRetryable with its state, and a run of a job that is gone,
// or one with no history, ErrNotFound. The new attempt has the job's whole
// retry budget (Run.attempts_before_replay) and origin REPLAY. A cancelled
// run's cancel marker is cleared first (needs Redis), or the runner would
// end the new attempt CANCELLED too.
func (o *Operator) Retry(ctx context.Context, runID string) (RetryResult, error) {
	if err := o.need("retry", map[string]bool{"Jobs": o.cfg.Jobs != nil, "History": o.cfg.History != nil, "Enqueuer": o.cfg.Enqueuer != nil}); err != nil {
		return RetryResult{}, err
	}
	jobID := JobOfRun(runID)
	if jobID == "" {
		return RetryResult{}, fmt.Errorf("run id %q: not a job's run id (job id + \"@\" + due ms): %w", runID, ErrNotFound)
	}
	job, spec, err := o.job(ctx, jobID)
	if err != nil {
		return RetryResult{}, err
	}
	recs, err := o.cfg.History.ListRuns(ctx, jobID, retryScan)
	if err != nil {
		return RetryResult{}, fmt.Errorf("read the history of job %q: %w", jobID, err)
	}
	var last store.RunRecord
	for _, r := range recs {
		if r.RunID == runID && r.Attempt > last.Attempt {
			last = r
		}
	}
	if last.RunID == "" {
		return RetryResult{}, fmt.Errorf("run %s: no attempt in the history of job %q: %w", runID, jobID, ErrNotFound)
	}
	if err := RetryDecision(last); err != nil {
		return RetryResult{}, err
	}
	if last.State == store.StateCancelled {
		if err := o.need("retry a cancelled run", map[string]bool{"Redis": o.cfg.Redis != nil, "RunnerKeyPrefix": o.cfg.RunnerKeyPrefix != ""}); err != nil {
			return RetryResult{}, err
		}
		if err := runner.ClearEndMarkers(ctx, o.cfg.Redis, o.cfg.RunnerKeyPrefix, jobID, runID); err != nil {
			return RetryResult{}, err
		}
	}
	e, err := retryEntry(last, o.cfg.Now())
	if err != nil {
		return RetryResult{}, err
	}
	if err := deadletter.WithDefinition(&e, spec, job.Revision); err != nil {
		return RetryResult{}, err
	}
	if err := o.cfg.Enqueuer.Enqueue(ctx, e); err != nil {
		return RetryResult{}, fmt.Errorf("enqueue the retry of run %s: %w", runID, err)
	}
	// The new attempt is in the history at once, as scheduled: runs get
	// shows it, and a second retry is refused rather than enqueued twice.
	// Its events (ENQUEUED on) overwrite this record.
	next := store.RunRecord{JobID: jobID, RunID: runID, Attempt: e.Attempt, Due: last.Due, AttemptDue: e.Due,
		State: store.StateScheduled, UpdatedAt: e.Due}
	if err := o.cfg.History.RecordRun(ctx, next); err != nil {
		o.cfg.Logger.Warn("retry enqueued; its scheduled attempt not recorded in the history", "run_id", runID, "err", err)
	}
	o.record(ctx, Action{Kind: "retry", JobID: jobID, Team: spec.GetOwnerTeam(), RunID: runID, Detail: fmt.Sprintf("attempt %d", e.Attempt)})
	return RetryResult{JobID: jobID, Attempt: e.Attempt}, nil
}

// retryEntry is the due entry, due at now, of the attempt after last: the
// run's identity and due time; WithDefinition fills in the rest.
func retryEntry(last store.RunRecord, now time.Time) (store.DueEntry, error) {
	due := store.Truncate(now)
	before := uint32(last.Attempt)
	run := &sundialv1.Run{
		RunId: last.RunID, JobId: last.JobID, DueTime: timestamppb.New(last.Due), Attempt: before + 1,
		AttemptDueTime: timestamppb.New(due), Origin: sundialv1.RunOrigin_RUN_ORIGIN_REPLAY, AttemptsBeforeReplay: before,
	}
	payload, err := proto.Marshal(run)
	if err != nil {
		return store.DueEntry{}, fmt.Errorf("encode the retry of run %s: %w", last.RunID, err)
	}
	e := store.DueEntry{Due: due, JobID: last.JobID, Kind: store.KindRetry, RunID: last.RunID, Attempt: int(run.GetAttempt()), Payload: payload}
	if err := e.Validate(); err != nil {
		return store.DueEntry{}, fmt.Errorf("retry run %s: %w", last.RunID, err)
	}
	return e, nil
}
