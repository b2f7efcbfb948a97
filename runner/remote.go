package runner

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/sundialhq/sundial/discovery"
	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/target"
)

// Remote executes handler runs on workers outside the runner's process: a
// worker gateway (package gateway) whose team workers poll it for attempts.
// The runner keeps the lease, its renewals, the fencing token, the events,
// the dedupe mark and the commits, exactly as for Config.Handlers; Remote
// only carries the attempt to a worker and its outcome back.
type Remote interface {
	// Serves reports whether a live worker of team in pool serves
	// handler.
	Serves(pool, team, handler string) bool
	// Served lists the (team, handler, pool) triples live workers serve,
	// for the runner's announcements.
	Served() []discovery.ServedHandler
	// HandleAttempt executes one attempt on a worker of the run's owner
	// team, as target.AttemptHandler: it returns when the worker completes
	// the attempt, when ctx ends, or when the worker is lost (a retryable
	// failure, code "worker_lost").
	HandleAttempt(ctx context.Context, req target.Request) error
}

// reasonNoWorker is the reason of the DEFERRED event of a handler run that
// no live executor serves for its team.
const reasonNoWorker = "no_worker"

// remoteHandler adapts a Remote to the target.AttemptHandler of Targets.
func remoteHandler(rm Remote) target.AttemptHandler {
	if rm == nil {
		return nil
	}
	return remoteAttempt{rm}
}

type remoteAttempt struct{ Remote }

func (a remoteAttempt) Handle(ctx context.Context, run *sundialv1.Run) error {
	return a.HandleAttempt(ctx, target.Request{Run: run})
}

// handlerName is the handler a run's target names, when it is a handler
// target.
func handlerName(run *sundialv1.Run) (string, bool) {
	h := run.GetTarget().GetHandler()
	if h == nil {
		return "", false
	}
	return h.GetName(), true
}

// servesHandler reports whether this runner executes team's runs of the
// handler name for jobs of pool: it has the handler and serves pool, or its
// Remote has a live worker of the team and pool that serves it.
func (r *router) servesHandler(pool, team, name string) bool {
	if _, ok := r.cfg.Handlers[name]; ok && pool == r.cfg.Pool {
		return true
	}
	return r.cfg.Remote != nil && r.cfg.Remote.Serves(pool, team, name)
}

// servedHandlers are the handlers the runner announces: its own for every
// team of its pool, and its Remote's per team and pool.
func (r *router) servedHandlers() []discovery.ServedHandler {
	out := make([]discovery.ServedHandler, 0, len(r.cfg.Handlers))
	for name := range r.cfg.Handlers {
		out = append(out, discovery.ServedHandler{Name: name})
	}
	if r.cfg.Remote != nil {
		out = append(out, r.cfg.Remote.Served()...)
	}
	return out
}

// handlerRun is what decides where a handler run executes: the run's pool
// (jobspec.PoolOf: never empty), owner team and handler, and whether this
// runner serves them itself (servesHandler).
type handlerRun struct {
	Pool, Team, Handler string
	Here                bool
}

// handlerPlace is where a handler run goes: executed here, handed to one
// of Executors, or deferred as no_worker for Why.
type handlerPlace struct {
	Here      bool
	Executors []string
	Why       string
}

// placeHandler decides where h goes, given the directory's members and
// this runner's id self: here when this runner serves it, else to the live
// members other than self that serve the team's handler for jobs of the
// run's pool and whose id names a directed topic (sorted as listed), else
// nowhere, with the reason naming the pool. It does no I/O.
func placeHandler(h handlerRun, members []discovery.Member, self string) handlerPlace {
	if h.Here {
		return handlerPlace{Here: true}
	}
	var ids []string
	for _, m := range members {
		if m.State == discovery.Live && m.ID != self && m.Serves(h.Pool, h.Team, h.Handler) && jobspec.CheckExecutorID(m.ID) == "" {
			ids = append(ids, m.ID)
		}
	}
	if len(ids) == 0 {
		return handlerPlace{Why: fmt.Sprintf("no live worker of team %s serves handler %s in pool %s", h.Team, h.Handler, h.Pool)}
	}
	return handlerPlace{Executors: ids}
}

// routeHandler hands a handler run this runner does not execute to a live
// executor that serves its team's handler in the run's pool (its directed
// topic), or, when none does, defers it by Config.RouteDelay (DEFERRED,
// reason no_worker, the pool named in the event's error message, no
// attempt spent): the run waits for a worker instead of being
// dead-lettered.
func (r *router) routeHandler(ctx context.Context, x *execution, h handlerRun) result {
	p := placeHandler(h, r.directory.All(), r.cfg.ID)
	if len(p.Executors) == 0 {
		r.m.noWorker.WithLabelValues(h.Team).Inc()
		x.logger().Info("no live executor serves the run's handler; deferred", "why", p.Why, "delay", r.cfg.RouteDelay)
		return x.settle().deferRunWhy(ctx, r.cfg.RouteDelay, reasonNoWorker, p.Why)
	}
	return r.handOver(ctx, x, p.Executors[rand.IntN(len(p.Executors))]) //nolint:gosec // spreading load needs no secure draw
}
