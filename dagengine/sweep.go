package dagengine

import (
	"context"
	"errors"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/sundialhq/sundial/dagengine/dagrun"
	"github.com/sundialhq/sundial/internal/backoff"
	"github.com/sundialhq/sundial/store"
)

// sweepLoop visits every unfinished DAG run at start and then every
// SweepInterval: it ticks each (a node past its deadline times out even if
// the instance that tracked it died), carries out work a dead instance left
// in a run's outbox, and tracks the run's next deadline here.
func (e *Engine) sweepLoop(ctx context.Context) {
	for {
		if err := e.sweep(ctx); err != nil && ctx.Err() == nil {
			e.cfg.Logger.Warn("sweep of active DAG runs failed; next sweep retries", "err", err)
		}
		if !backoff.Sleep(ctx, e.cfg.SweepInterval) {
			return
		}
	}
}

// sweep visits every active run once.
func (e *Engine) sweep(ctx context.Context) error {
	start := e.cfg.Now()
	ids, err := e.cfg.Store.ListActiveDagRuns(ctx)
	if err != nil {
		return err
	}
	var running, stuck atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(e.cfg.Concurrency)
	for _, id := range ids {
		g.Go(func() error {
			res, err := e.runs.Apply(gctx, id, dagrun.Tick{})
			switch {
			case errors.Is(err, store.ErrNotFound):
				return nil
			case errors.Is(err, ErrPermanent):
				e.cfg.Logger.Error("DAG run cannot be processed", "dag_run", id, "err", err)
				return nil
			case err != nil:
				e.cfg.Logger.Warn("sweep of DAG run failed", "dag_run", id, "err", err)
				return nil
			}
			switch {
			case !res.State.Active():
				// Listed as active, but ended: an index a crash left behind.
				if err := e.runs.rewrite(gctx, id); err != nil {
					e.cfg.Logger.Debug("rewrite of ended DAG run failed", "dag_run", id, "err", err)
				}
			case res.State.Stuck:
				stuck.Add(1)
			default:
				running.Add(1)
			}
			return nil
		})
	}
	_ = g.Wait()
	e.runs.m.active.WithLabelValues("running").Set(float64(running.Load()))
	e.runs.m.active.WithLabelValues("stuck").Set(float64(stuck.Load()))
	e.cfg.Logger.Debug("swept active DAG runs", "runs", len(ids), "took", e.cfg.Now().Sub(start))
	return ctx.Err()
}
