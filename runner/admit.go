package runner

import (
	"context"

	"github.com/sundialhq/sundial/discovery"
	"github.com/sundialhq/sundial/jobspec"
	"github.com/sundialhq/sundial/runner/breaker"
)

// admitStep is what admission does with a delivery (planAdmit).
type admitStep int

const (
	// admitHandler: a handler run this runner does not serve goes to a
	// member that does, or is deferred as no_worker (routeHandler).
	admitHandler admitStep = iota
	// admitRoute: a run that asks for an executor goes where the plan's
	// route says: fanned out, handed over or deferred (carryRoute).
	admitRoute
	// admitPool: a run of another pool's job is handed over to a member of
	// that pool, or deferred as no_executor (routePool).
	admitPool
	// admitDiscard: the run found every pool slot busy under
	// BlockingDiscard and is skipped (discard).
	admitDiscard
	// admitCircuitOpen: its downstream's breaker is open; the run is
	// deferred by the breaker's open period.
	admitCircuitOpen
	// admitTeam: nothing before the run's team stands in its way; its
	// team's quotas are taken next (teamGate.take), and then its lease.
	admitTeam
)

// admitChecks are what planAdmit asks of a delivery. The funcs are asked
// only when the checks before them let the run through, since asking may
// change what is asked: a pick moves a round-robin's turn, and reading a
// breaker whose open period is over moves it to half-open, where it lets
// a few probes through.
type admitChecks struct {
	// handler: the run targets a handler; servesHandler says whether this
	// runner executes it (itself or through its Remote).
	handler       bool
	servesHandler func() bool
	// needsRoute: the run asks for an executor and has not reached one
	// (router.needsRoute); route is where it goes (planRoute).
	needsRoute bool
	route      func() routePlan
	// pool is where a run that does not target a handler goes among its
	// job's pool (planPool).
	pool func() routePlan
	// poolBusy: the delivery found every pool slot busy under
	// BlockingDiscard.
	poolBusy bool
	// breakerOpen says whether the breaker of the run's downstream is
	// open.
	breakerOpen func() bool
}

// admitPlan is what admission does with a delivery.
type admitPlan struct {
	step admitStep
	// route: admitRoute's and admitPool's plan (never routeHere).
	route routePlan
	// routedHere: the run asked for an executor and was given this runner;
	// it counts among the routed runs whatever the later checks decide.
	routedHere bool
}

// planAdmit decides what stands before a run's lease, in this order: a
// handler run goes to a member that serves its handler; a routed record
// that came back to its queue before its executor was chosen is routed;
// a run that does not target a handler goes to its job's pool; a run that
// found the pool's slots busy under BlockingDiscard is discarded; an open
// breaker of its downstream defers it; else its team's quotas are taken.
// Placement comes first, so that a run is discarded, deferred or counted
// against a team only by the runner that would execute it. It does no
// I/O.
func planAdmit(c admitChecks) admitPlan {
	var p admitPlan
	if c.handler && !c.servesHandler() {
		return admitPlan{step: admitHandler}
	}
	if c.needsRoute {
		if rp := c.route(); rp.step != routeHere {
			return admitPlan{step: admitRoute, route: rp}
		}
		p.routedHere = true
	}
	if !c.handler {
		if rp := c.pool(); rp.step != routeHere {
			p.step, p.route = admitPool, rp
			return p
		}
	}
	switch {
	case c.poolBusy:
		p.step = admitDiscard
	case c.breakerOpen():
		p.step = admitCircuitOpen
	default:
		p.step = admitTeam
	}
	return p
}

// admit carries out what stands before the run's lease (planAdmit). It
// returns the function that gives back the team's slot (taken before the
// job's lease, given back when the attempt ends), or ok false and how the
// delivery ended.
func (x *execution) admit(ctx context.Context, downstream breaker.Key) (release func(), res result, ok bool) {
	r, s := x.r, x.settle()
	pool, team := jobspec.PoolOf(x.run.GetPool()), x.run.GetOwnerTeam()
	name, handler := handlerName(x.run)
	var live []discovery.Member // the members the route was planned from
	p := planAdmit(admitChecks{
		handler:       handler,
		servesHandler: func() bool { return r.routes.servesHandler(pool, team, name) },
		needsRoute:    r.routes.needsRoute(x.rec),
		route: func() routePlan {
			var rp routePlan
			rp, live = r.routes.planRun(x.run)
			return rp
		},
		pool:        func() routePlan { return r.routes.planRunPool(x.run) },
		poolBusy:    x.poolBusy,
		breakerOpen: func() bool { return r.breakers.Open(downstream) },
	})
	if p.routedHere {
		r.routes.countRouted(x.run)
	}
	switch p.step {
	case admitHandler:
		return nil, r.routes.routeHandler(ctx, x, handlerRun{Pool: pool, Team: team, Handler: name}), false
	case admitRoute:
		return nil, r.routes.carryRoute(ctx, x, p.route, live), false
	case admitPool:
		return nil, r.routes.routePool(ctx, x, p.route), false
	case admitDiscard:
		return nil, x.discard(ctx), false
	case admitCircuitOpen:
		return nil, s.deferRun(ctx, r.breakers.OpenTimeout(), reasonCircuitOpen, nil), false
	case admitTeam:
	}
	release, teamRes, wait := teamGate{x}.take(ctx)
	switch teamRes {
	case teamFull:
		r.m.teamDeferrals.WithLabelValues(team).Inc()
		return nil, s.deferRun(ctx, teamGate{x}.delay(), reasonTeamQuota, nil), false
	case teamRate:
		r.m.teamRateDeferrals.WithLabelValues(team).Inc()
		return nil, s.deferRun(ctx, wait, reasonTeamRate, nil), false
	case teamAborted:
		return nil, unfinished, false
	case teamTaken:
	}
	return release, unfinished, true
}
