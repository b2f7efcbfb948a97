package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/schedule"
	"github.com/sundialhq/sundial/store"
)

// BackfillPolicy says which occurrences of the range a backfill runs.
type BackfillPolicy int

const (
	// BackfillEvery runs every occurrence of the range.
	BackfillEvery BackfillPolicy = iota
	// BackfillOnePerWindow runs the latest occurrence of each window
	// (From, From+Window, ...) that has one.
	BackfillOnePerWindow
)

// donePoll is how long Backfill waits for events before it asks Redis
// whether its pending runs are done.
const donePoll = 2 * time.Second

// MaxBackfill is the most occurrences one backfill computes; a larger range
// is refused rather than held in memory.
const MaxBackfill = 100_000

// BackfillOptions are Backfill's options.
type BackfillOptions struct {
	// From and To bound the range: occurrences due at or after From and
	// before To. Required, From before To.
	From, To time.Time
	Policy   BackfillPolicy
	// Window is the window of BackfillOnePerWindow. Required with it.
	Window time.Duration
	// MaxConcurrent is the most runs of the backfill pending at once
	// (enqueued, not finished). Required, at least 1, unless DryRun (which
	// enqueues nothing).
	MaxConcurrent int
	// DryRun computes the occurrences and enqueues nothing.
	DryRun bool
	// Progress, if set, is called with each run that finished.
	Progress func(ev *sundialv1.RunEvent)
}

// Validate reports every bad option.
func (b BackfillOptions) Validate() error {
	var errs []error
	switch {
	case b.From.IsZero() || b.To.IsZero():
		errs = append(errs, errors.New("from, to: both required"))
	case !b.From.Before(b.To):
		errs = append(errs, fmt.Errorf("from %s: must be before to %s", b.From.Format(time.RFC3339), b.To.Format(time.RFC3339)))
	}
	switch b.Policy {
	case BackfillEvery:
	case BackfillOnePerWindow:
		if b.Window <= 0 {
			errs = append(errs, fmt.Errorf("window %s: must be positive with the one-per-window policy", b.Window))
		}
	default:
		errs = append(errs, fmt.Errorf("policy %d: unknown", b.Policy))
	}
	if b.MaxConcurrent < 1 && !b.DryRun {
		errs = append(errs, fmt.Errorf("max concurrent %d: must be at least 1", b.MaxConcurrent))
	}
	return errors.Join(errs...)
}

// BackfillResult is the outcome of Backfill.
type BackfillResult struct {
	// Occurrences are the due times the backfill runs, in order: the
	// preview.
	Occurrences []time.Time
	// AlreadyDone counts occurrences whose run had already run (its
	// dedupe mark exists); they are not enqueued.
	AlreadyDone int
	// Enqueued counts the runs enqueued.
	Enqueued int
	// Finished counts the enqueued runs by terminal state.
	Finished map[sundialv1.RunState]int
}

// Backfill runs the occurrences of jobID's schedule in a time range, as
// the definition in force computes them. Each is enqueued as a trigger
// entry with the occurrence's own run id (job id + "@" + due ms) and origin
// TRIGGER, due when it is enqueued; at most MaxConcurrent are pending at
// once, and Backfill returns when every enqueued run has finished (or ctx
// ends). Occurrences already run are skipped, so repeating a backfill
// creates no second run.
func (o *Operator) Backfill(ctx context.Context, jobID string, opts BackfillOptions) (BackfillResult, error) {
	if err := opts.Validate(); err != nil {
		return BackfillResult{}, fmt.Errorf("backfill job %q: %w", jobID, err)
	}
	if err := o.need("backfill", map[string]bool{"Jobs": o.cfg.Jobs != nil}); err != nil {
		return BackfillResult{}, err
	}
	job, spec, err := o.job(ctx, jobID)
	if err != nil {
		return BackfillResult{}, err
	}
	if spec.GetSchedule() == nil {
		return BackfillResult{}, fmt.Errorf("backfill job %q: it has no schedule", jobID)
	}
	s, errs := jobspec.CompileSchedule(spec.GetSchedule(), job.UpdatedAt)
	if len(errs) > 0 {
		return BackfillResult{}, fmt.Errorf("backfill job %q: the stored schedule does not compile: %v", jobID, errs)
	}
	occ, err := Occurrences(s, opts)
	if err != nil {
		return BackfillResult{}, fmt.Errorf("backfill job %q: %w", jobID, err)
	}
	res := BackfillResult{Occurrences: occ, Finished: map[sundialv1.RunState]int{}}
	if opts.DryRun || len(occ) == 0 {
		return res, nil
	}
	if err := o.need("backfill", map[string]bool{"Enqueuer": o.cfg.Enqueuer != nil, "Leases": o.cfg.Leases != nil}); err != nil {
		return res, err
	}
	f, err := o.follow(ctx)
	if err != nil {
		return res, err
	}
	defer f.close()
	o.record(ctx, Action{Kind: "backfill", JobID: jobID, Team: spec.GetOwnerTeam(),
		Detail: fmt.Sprintf("%d runs from %s to %s", len(occ), opts.From.UTC().Format(time.RFC3339), opts.To.UTC().Format(time.RFC3339))})

	pending := map[string]bool{}
	next := 0
	for next < len(occ) || len(pending) > 0 {
		for next < len(occ) && len(pending) < opts.MaxConcurrent {
			due := occ[next]
			next++
			runID := store.RunID(jobID, due)
			done, err := o.cfg.Leases.Done(ctx, jobID, runID)
			if err != nil {
				return res, fmt.Errorf("backfill job %q: %w", jobID, err)
			}
			if done {
				res.AlreadyDone++
				continue
			}
			if err := o.cfg.Enqueuer.Enqueue(ctx, o.backfillEntry(job, runID, due)); err != nil {
				return res, fmt.Errorf("backfill job %q: enqueue %s: %w", jobID, runID, err)
			}
			pending[runID] = true
			res.Enqueued++
		}
		if len(pending) == 0 {
			continue
		}
		pollCtx, cancel := context.WithTimeout(ctx, donePoll)
		evs, err := f.next(pollCtx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return res, fmt.Errorf("backfill job %q: %d runs pending: %w", jobID, len(pending), ctx.Err())
		case errors.Is(err, context.DeadlineExceeded):
			// A run that was done already by the time it was enqueued
			// (an earlier backfill's run finishing) ends with no event:
			// its dedupe mark tells.
			for runID := range pending {
				done, err := o.cfg.Leases.Done(ctx, jobID, runID)
				if err != nil {
					return res, fmt.Errorf("backfill job %q: %w", jobID, err)
				}
				if done {
					delete(pending, runID)
					res.Finished[sundialv1.RunState_RUN_STATE_SUCCEEDED]++
				}
			}
			continue
		case err != nil:
			return res, fmt.Errorf("backfill job %q: %d runs pending: %w", jobID, len(pending), err)
		}
		for _, ev := range evs {
			if pending[ev.GetRunId()] && terminal(ev.GetState()) {
				delete(pending, ev.GetRunId())
				res.Finished[ev.GetState()]++
				if opts.Progress != nil {
					opts.Progress(ev)
				}
			}
		}
	}
	return res, nil
}

// backfillEntry is the trigger entry of one backfilled occurrence. It is
// due now, so its run's attempt due time (and trigger latency) is the
// backfill's, while its run id and due time are the occurrence's.
func (o *Operator) backfillEntry(job store.Job, runID string, due time.Time) store.DueEntry {
	t := &sundialv1.Trigger{JobId: job.ID, IdempotencyKey: runID, RequestedAt: timestamppb.New(due), Caller: "backfill"}
	payload, _ := proto.Marshal(t) // a Trigger always encodes
	return store.DueEntry{Due: store.Truncate(o.cfg.Now()), JobID: job.ID, Kind: store.KindTrigger, RunID: runID, Attempt: 1, Revision: job.Revision, Payload: payload}
}

// ErrRangeTooLarge is what Backfill and Occurrences return, wrapped, for a
// range of more than MaxBackfill occurrences: asking again cannot help.
var ErrRangeTooLarge = errors.New("backfill range too large")

// Occurrences returns the due times a backfill with opts runs, in order.
func Occurrences(s *schedule.Schedule, opts BackfillOptions) ([]time.Time, error) {
	var all []time.Time
	from, to := opts.From.UTC(), opts.To.UTC()
	for t, ok := s.Next(from.Add(-time.Nanosecond)); ok && t.Before(to); t, ok = s.Next(t) {
		if len(all) == MaxBackfill {
			return nil, fmt.Errorf("%w: more than %d occurrences from %s to %s (the most one backfill runs): backfill a shorter range", ErrRangeTooLarge, MaxBackfill, from.Format(time.RFC3339), to.Format(time.RFC3339))
		}
		all = append(all, store.Truncate(t))
	}
	if opts.Policy != BackfillOnePerWindow {
		return all, nil
	}
	var out []time.Time
	for i, t := range all {
		w := t.Sub(from) / opts.Window
		if i+1 == len(all) || all[i+1].Sub(from)/opts.Window != w {
			out = append(out, t)
		}
	}
	return out, nil
}
