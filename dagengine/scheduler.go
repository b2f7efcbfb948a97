package dagengine

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

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
	next   time.Time // zero: nothing more to fire
	retry  time.Time // after a failed start: not before this
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

// fireDue starts the runs of every occurrence due by now.
func (s *scheduler) fireDue(ctx context.Context) {
	cfg := s.e.cfg
	for ctx.Err() == nil {
		now := cfg.Now()
		var due *scheduled
		s.mu.Lock()
		for _, d := range s.dags {
			if at := d.wakeAt(); !at.IsZero() && !at.After(now) && (due == nil || at.Before(due.wakeAt())) {
				due = d
			}
		}
		s.mu.Unlock()
		if due == nil {
			return
		}
		at := due.next
		_, _, err := s.e.runs.StartRun(ctx, due.dag.ID, at, OriginSchedule)
		s.mu.Lock()
		switch {
		case errors.Is(err, ErrNotRunnable), errors.Is(err, ErrPermanent):
			cfg.Logger.Info("scheduled DAG no longer runnable; dropped until its definition changes", "dag", due.dag.ID, "err", err)
			if s.dags[due.dag.ID] == due {
				delete(s.dags, due.dag.ID)
			}
		case err != nil:
			cfg.Logger.Warn("starting a scheduled DAG run failed; retrying", "dag", due.dag.ID, "due", at, "err", err)
			due.retry = cfg.Now().Add(cfg.RetryMax)
		default:
			due.retry = time.Time{}
			due.next = due.after(at, cfg.Now())
		}
		s.mu.Unlock()
	}
}
