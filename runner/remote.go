package runner

import (
	"context"
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
	// Serves reports whether a live worker of team serves handler.
	Serves(team, handler string) bool
	// Served lists the (team, handler) pairs live workers serve, for the
	// runner's announcements.
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
// handler name: it has the handler, or its Remote has a live worker of the
// team that serves it.
func (r *Runner) servesHandler(team, name string) bool {
	if _, ok := r.cfg.Handlers[name]; ok {
		return true
	}
	return r.cfg.Remote != nil && r.cfg.Remote.Serves(team, name)
}

// servedHandlers are the handlers the runner announces: its own for every
// team, and its Remote's per team.
func (r *Runner) servedHandlers() []discovery.ServedHandler {
	out := make([]discovery.ServedHandler, 0, len(r.cfg.Handlers))
	for name := range r.cfg.Handlers {
		out = append(out, discovery.ServedHandler{Name: name})
	}
	if r.cfg.Remote != nil {
		out = append(out, r.cfg.Remote.Served()...)
	}
	return out
}

// handlerExecutors are the live members, other than self, that serve
// team's handler name and whose id names a directed topic; it does no I/O.
func handlerExecutors(members []discovery.Member, self, team, name string) []string {
	var ids []string
	for _, m := range members {
		if m.State == discovery.Live && m.ID != self && m.Serves(team, name) && jobspec.CheckExecutorID(m.ID) == "" {
			ids = append(ids, m.ID)
		}
	}
	return ids
}

// routeHandler hands a handler run this runner cannot execute to a live
// executor that serves its team's handler (its directed topic), or, when
// none does, defers it by Config.RouteDelay (DEFERRED, reason no_worker, no
// attempt spent): the run waits for a worker instead of being
// dead-lettered.
func (x *execution) routeHandler(ctx context.Context, name string) result {
	r, team := x.r, x.run.GetOwnerTeam()
	ids := handlerExecutors(r.directory.All(), r.cfg.ID, team, name)
	if len(ids) == 0 {
		r.m.noWorker.WithLabelValues(team).Inc()
		x.logger().Info("no live executor serves the run's handler; deferred", "handler", name, "team", team, "delay", r.cfg.RouteDelay)
		return x.settle().deferRun(ctx, r.cfg.RouteDelay, reasonNoWorker, nil)
	}
	return x.handOver(ctx, ids[rand.IntN(len(ids))]) //nolint:gosec // spreading load needs no secure draw
}
