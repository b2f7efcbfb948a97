package dagengine

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/internal/backoff"
	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/schedule"
	"github.com/sundialhq/sundial/store"
)

// scheduler starts the DAG runs of scheduled DAGs. Every engine instance
// schedules every DAG: the DAG run id is dag id + "@" + due time, and the
// store creates a run once (CreateDagRun), so instances racing for one
// occurrence start one run. The cost is one conditional insert per instance
// per occurrence, which is small next to a DAG run's own writes.
//
// Where to continue after a restart is read from the store: the latest run
// with origin "schedule". Occurrences missed while no instance ran are
// treated like a job's, by the DAG's misfire policy and catch-up window.
type scheduler struct {
	e *Engine

	mu      sync.Mutex
	dags    map[string]*scheduled
	pending map[string]store.Dag // definitions changed in this process
	changed chan struct{}
}

type scheduled struct {
	dag    store.Dag
	sched  *schedule.Schedule
	policy sundialv1.MisfirePolicy
	window time.Duration
	next   time.Time        // zero: nothing more to fire
	retry  time.Time        // after a failed start: not before this
	failed *backoff.Backoff // the waits between failed starts of next; nil after a success
}

func newScheduler(e *Engine) *scheduler {
	return &scheduler{e: e, dags: map[string]*scheduled{}, pending: map[string]store.Dag{}, changed: make(chan struct{}, 1)}
}

// notify tells the scheduler about a definition this process stored or
// deleted, so that it does not wait for the next refresh.
func (s *scheduler) notify(d store.Dag) {
	s.mu.Lock()
	s.pending[d.ID] = d
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

func (s *scheduler) run(ctx context.Context) {
	cfg := s.e.cfg
	nextRefresh := time.Time{}
	for {
		now := cfg.Now()
		if !now.Before(nextRefresh) {
			if err := s.refresh(ctx); err != nil && ctx.Err() == nil {
				cfg.Logger.Warn("reading DAG definitions failed; next refresh retries", "err", err)
			}
			nextRefresh = cfg.Now().Add(cfg.SweepInterval)
		}
		s.applyPending(ctx)
		s.fireDue(ctx)

		wake := nextRefresh
		s.mu.Lock()
		for _, d := range s.dags {
			if at := d.wakeAt(); !at.IsZero() && at.Before(wake) {
				wake = at
			}
		}
		s.mu.Unlock()
		t := time.NewTimer(max(wake.Sub(cfg.Now()), 0))
		select {
		case <-ctx.Done():
		case <-s.changed:
		case <-t.C:
		}
		t.Stop()
		if ctx.Err() != nil {
			return
		}
	}
}

func (d *scheduled) wakeAt() time.Time {
	if d.next.IsZero() {
		return time.Time{}
	}
	if d.retry.After(d.next) {
		return d.retry
	}
	return d.next
}

// refresh reads every definition from the store.
func (s *scheduler) refresh(ctx context.Context) error {
	dags, err := s.e.cfg.Store.ListDags(ctx)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, d := range dags {
		seen[d.ID] = true
		s.update(ctx, d)
	}
	s.mu.Lock()
	for id := range s.dags {
		if !seen[id] {
			delete(s.dags, id)
		}
	}
	s.mu.Unlock()
	return nil
}

func (s *scheduler) applyPending(ctx context.Context) {
	s.mu.Lock()
	pending := s.pending
	s.pending = map[string]store.Dag{}
	s.mu.Unlock()
	for _, d := range pending {
		s.update(ctx, d)
	}
}

// update takes a definition: a new or changed one is (re)scheduled from the
// latest scheduled run in the store; a deleted, paused or unscheduled one is
// dropped.
func (s *scheduler) update(ctx context.Context, d store.Dag) {
	s.mu.Lock()
	cur := s.dags[d.ID]
	s.mu.Unlock()
	if cur != nil && cur.dag.Revision == d.Revision && string(cur.dag.Hash) == string(d.Hash) && cur.dag.Deleted == d.Deleted {
		return
	}
	drop := func() {
		s.mu.Lock()
		delete(s.dags, d.ID)
		s.mu.Unlock()
	}
	if d.Deleted {
		drop()
		return
	}
	spec := &sundialv1.DagSpec{}
	if err := proto.Unmarshal(d.Spec, spec); err != nil {
		s.e.cfg.Logger.Error("stored DAG definition does not decode; not scheduled", "dag", d.ID, "err", err)
		drop()
		return
	}
	if spec.GetPaused() || spec.GetSchedule() == nil {
		drop()
		return
	}
	sched, errs := jobspec.CompileSchedule(spec.GetSchedule(), d.UpdatedAt)
	if len(errs) > 0 {
		s.e.cfg.Logger.Error("stored DAG schedule does not compile; not scheduled", "dag", d.ID, "errors", errs)
		drop()
		return
	}
	last, err := s.lastScheduled(ctx, d.ID)
	if err != nil {
		s.e.cfg.Logger.Warn("reading the DAG's latest run failed; next refresh retries", "dag", d.ID, "err", err)
		return // keep the old entry; the revision check makes the next refresh retry
	}
	e := &scheduled{dag: d, sched: sched, policy: jobspec.MisfirePolicy(spec.GetSchedule()), window: jobspec.CatchUpWindow(spec.GetSchedule())}
	e.next = e.after(last, s.e.cfg.Now())
	s.mu.Lock()
	s.dags[d.ID] = e
	s.mu.Unlock()
}

// lastScheduled returns the due time of the DAG's latest run started by its
// schedule, or zero.
func (s *scheduler) lastScheduled(ctx context.Context, dagID string) (time.Time, error) {
	runs, err := s.e.cfg.Store.ListDagRuns(ctx, dagID, 100)
	if err != nil {
		return time.Time{}, err
	}
	for _, r := range runs {
		if r.Origin == OriginSchedule {
			return r.Due, nil
		}
	}
	return time.Time{}, nil
}

// after returns the occurrence to fire after the one due at last (zero:
// none fired under this definition yet), at now.
func (d *scheduled) after(last, now time.Time) time.Time {
	accepted := d.dag.UpdatedAt
	if last.IsZero() || last.Before(accepted) {
		t, _ := jobspec.FirstDue(d.sched, d.policy, d.window, accepted, now)
		return t
	}
	next, ok := d.sched.Next(last)
	if !ok || next.After(now) {
		return next
	}
	// Behind: the misfire rule decides, one occurrence at a time (each fired
	// occurrence asks again from itself).
	plan := jobspec.CatchUp(d.sched, d.policy, d.window, next, now, 1)
	if len(plan.Fire) > 0 {
		return plan.Fire[0]
	}
	return plan.Next
}

// fireDue starts the runs of every occurrence due by now, and of those that
// come due while it works, until none is due and none is starting.
//
// Distinct DAGs start at once, up to Concurrency: their runs are
// independent, and after a store outage every DAG is due together. One
// DAG's occurrences start one at a time and in order, because its next
// occurrence is computed from the one last started (after), and a restart
// continues after the DAG's latest scheduled run in the store
// (lastScheduled), which must never pass an occurrence not yet started.
func (s *scheduler) fireDue(ctx context.Context) {
	cfg := s.e.cfg
	// Buffered for every start in flight, so a finished start never waits
	// for this loop to take its result.
	done := make(chan started, cfg.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	inflight := map[*scheduled]bool{}
	for {
		now := cfg.Now()
		s.mu.Lock()
		due, later := s.dueLocked(now, inflight)
		s.mu.Unlock()
		for _, d := range due {
			if len(inflight) >= cfg.Concurrency || ctx.Err() != nil {
				break
			}
			inflight[d] = true
			id, at := d.dag.ID, d.next
			wg.Go(func() {
				_, _, err := s.e.runs.StartRun(ctx, id, at, OriginSchedule)
				done <- started{d: d, at: at, err: err}
			})
		}
		if len(inflight) == 0 {
			return
		}
		// A DAG not starting may come due (its retry wait ends) while
		// others are still starting: wake for it if a slot is free.
		var (
			wake  <-chan time.Time
			timer *time.Timer
		)
		if !later.IsZero() && len(inflight) < cfg.Concurrency && ctx.Err() == nil {
			timer = time.NewTimer(max(later.Sub(now), 0))
			wake = timer.C
		}
		select {
		case r := <-done:
			delete(inflight, r.d)
			s.settle(ctx, r)
		case <-wake:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// started is the outcome of one start of a scheduled occurrence.
type started struct {
	d   *scheduled
	at  time.Time
	err error
}

// dueLocked returns the DAGs not in flight that are due at now, earliest
// first, and the earliest wake-up of the others not in flight (zero: none).
func (s *scheduler) dueLocked(now time.Time, inflight map[*scheduled]bool) ([]*scheduled, time.Time) {
	var (
		due   []*scheduled
		later time.Time
	)
	for _, d := range s.dags {
		at := d.wakeAt()
		switch {
		case at.IsZero() || inflight[d]:
		case !at.After(now):
			due = append(due, d)
		case later.IsZero() || at.Before(later):
			later = at
		}
	}
	slices.SortFunc(due, func(a, b *scheduled) int { return a.wakeAt().Compare(b.wakeAt()) })
	return due, later
}

// settle takes the outcome of a start: the DAG moves on to its next
// occurrence, waits before trying the same one again, or is dropped.
func (s *scheduler) settle(ctx context.Context, r started) {
	cfg := s.e.cfg
	s.mu.Lock()
	defer s.mu.Unlock()
	d := r.d
	switch {
	case errors.Is(r.err, ErrNotRunnable), errors.Is(r.err, ErrPermanent):
		cfg.Logger.Info("scheduled DAG no longer runnable; dropped until its definition changes", "dag", d.dag.ID, "err", r.err)
		if s.dags[d.dag.ID] == d {
			delete(s.dags, d.dag.ID)
		}
	case r.err != nil:
		// Jittered and growing from RetryMin to RetryMax: after an outage
		// the DAGs come back within a few short waits, not a flat
		// RetryMax each, and instances do not retry in step.
		if d.failed == nil {
			d.failed = backoff.New(cfg.RetryMin, cfg.RetryMax)
		}
		wait := d.failed.Next()
		d.retry = cfg.Now().Add(wait)
		if ctx.Err() == nil {
			cfg.Logger.Warn("starting a scheduled DAG run failed; retrying", "dag", d.dag.ID, "due", r.at, "retry_in", wait, "err", r.err)
		}
	default:
		d.failed = nil
		d.retry = time.Time{}
		d.next = d.after(r.at, cfg.Now())
	}
}
