package registry

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/schedule"
	"github.com/sundialhq/sundial/store"
)

// resumeNext says whether the definition in rec resumes a paused job (the
// one in force, prior, is paused; this one is not) and returns the job's
// first due time. For a resumed job the occurrences that fell due while it
// was paused are not skipped: they follow the job's misfire policy, as for
// a dispatcher that was down, counted from when the job was paused (the
// paused definition's UpdatedAt). An "at" instant that passed before the
// pause stays skipped: it fired, or was misfired, then.
func (r *Registry) resumeNext(rec *kgo.Record, spec *sundialv1.JobSpec, prior stored, sched *schedule.Schedule, next, now time.Time) (time.Time, bool) {
	if !prior.found || prior.job.Deleted || prior.job.Revision >= r.revision(rec) {
		return next, false // new, or a replay: the store answers
	}
	// A stored definition that does not decode (nil, logged) is not known
	// to be paused: the job counts as changed, not resumed.
	if !r.decodeStored(prior.job).GetPaused() {
		return next, false
	}
	if sched == nil {
		return next, true
	}
	pausedAt := prior.job.UpdatedAt.UTC()
	s := spec.GetSchedule()
	t, ok := jobspec.FirstDue(sched, jobspec.MisfirePolicy(s), jobspec.CatchUpWindow(s), pausedAt, now)
	if !ok || (sched.Kind() == schedule.KindAt && t.Before(pausedAt)) {
		return time.Time{}, true
	}
	return t, true
}

// release moves the held entries of a job that is no longer paused back
// into the schedule: they are stored due now, a millisecond apart in their
// held order, and their wake-ups produced (Waker.Enqueue), so their shards'
// owners fire them at once and in order; only then do they leave the held
// set. They are due now rather than at their own due times because a
// dispatcher remembers the keys of the entries it fired (and a held entry
// counts as fired) for a while after their due time, and would take a
// wake-up with the same key for a duplicate. The run an entry carries keeps
// its run id and its attempt's due time.
// A crash in between leaves them in both places: the record is processed
// again (its answer UNCHANGED, which releases again) and a run fired twice
// keeps its run id, which runners deduplicate.
func (r *Registry) release(ctx context.Context, jobID string) error {
	var held []store.DueEntry
	if err := r.retry(ctx, "list_held", func() (err error) {
		held, err = r.cfg.Store.ListHeld(ctx, jobID)
		return err
	}); err != nil {
		return err
	}
	if len(held) == 0 {
		return nil
	}
	now := store.Truncate(r.cfg.Now())
	released := make([]store.DueEntry, len(held))
	for i, e := range held {
		e.Due = now.Add(time.Duration(i) * time.Millisecond)
		released[i] = e
	}
	if err := r.retry(ctx, "release_held", func() error { return r.cfg.Waker.Enqueue(ctx, released...) }); err != nil {
		return fmt.Errorf("schedule %d held entries of job %q: %w", len(held), jobID, err)
	}
	keys := make([]store.DueKey, len(held))
	for i, e := range held {
		keys[i] = e.Key()
	}
	if err := r.retry(ctx, "delete_held", func() error { return r.cfg.Store.DeleteHeld(ctx, keys...) }); err != nil {
		return fmt.Errorf("delete %d released entries of job %q: %w", len(held), jobID, err)
	}
	r.cfg.Logger.Info("held entries of a resumed job released", "job", jobID, "entries", len(held))
	return nil
}

// dropHeld deletes the held entries of a deleted job: nothing would ever
// release them.
func (r *Registry) dropHeld(ctx context.Context, jobID string) error {
	var held []store.DueEntry
	if err := r.retry(ctx, "list_held", func() (err error) {
		held, err = r.cfg.Store.ListHeld(ctx, jobID)
		return err
	}); err != nil || len(held) == 0 {
		return err
	}
	keys := make([]store.DueKey, len(held))
	for i, e := range held {
		keys[i] = e.Key()
	}
	return r.retry(ctx, "delete_held", func() error { return r.cfg.Store.DeleteHeld(ctx, keys...) })
}
