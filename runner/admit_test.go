package runner

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestPlanAdmitAsksEachCheckOnlyWhenTheOnesBeforeLetTheRunThrough: the
// order of admission, and which checks it asks. A check that refuses
// ends the plan: the ones after it are not asked, the breaker least of
// all (reading an open breaker whose period is over makes it half-open).
func TestPlanAdmitAsksEachCheckOnlyWhenTheOnesBeforeLetTheRunThrough(t *testing.T) {
	t.Parallel()
	here := routePlan{step: routeHere}
	handOver := routePlan{step: routeHandOver, member: "r2"}
	deferred := routePlan{step: routeDefer, reason: reasonNoExecutor}
	for _, tc := range []struct {
		name string
		// the facts
		handler, needsRoute, poolBusy bool
		// the answers of the lazy checks
		serves      bool
		route, pool routePlan
		open        bool
		want        admitPlan
		asked       []string
	}{
		{name: "a plain run of this runner's pool with a closed breaker goes on to its team's quotas",
			pool: here, want: admitPlan{step: admitTeam}, asked: []string{"pool", "breaker"}},
		{name: "a handler run this runner does not serve goes to one that does, nothing else asked",
			handler: true, needsRoute: true, poolBusy: true, open: true,
			want: admitPlan{step: admitHandler}, asked: []string{"serves"}},
		{name: "a handler run this runner serves is not placed in a pool",
			handler: true, serves: true, pool: handOver,
			want: admitPlan{step: admitTeam}, asked: []string{"serves", "breaker"}},
		{name: "a routed run handed over is neither placed in a pool, discarded nor deferred for the breaker",
			needsRoute: true, route: handOver, poolBusy: true, open: true,
			want: admitPlan{step: admitRoute, route: handOver}, asked: []string{"route"}},
		{name: "a routed run deferred for want of an executor",
			needsRoute: true, route: deferred, open: true,
			want: admitPlan{step: admitRoute, route: deferred}, asked: []string{"route"}},
		{name: "a routed run given to this runner counts as routed and goes on",
			needsRoute: true, route: here, pool: here,
			want: admitPlan{step: admitTeam, routedHere: true}, asked: []string{"route", "pool", "breaker"}},
		{name: "a routed run given to this runner counts as routed even when the breaker then defers it",
			needsRoute: true, route: here, pool: here, open: true,
			want: admitPlan{step: admitCircuitOpen, routedHere: true}, asked: []string{"route", "pool", "breaker"}},
		{name: "a handler run this runner serves that asks for an executor is routed",
			handler: true, serves: true, needsRoute: true, route: handOver,
			want: admitPlan{step: admitRoute, route: handOver}, asked: []string{"serves", "route"}},
		{name: "a run of another pool is handed over to it before the busy pool or the breaker is asked",
			pool: handOver, poolBusy: true, open: true,
			want: admitPlan{step: admitPool, route: handOver}, asked: []string{"pool"}},
		{name: "a run of a pool with no live member is deferred",
			pool: deferred, open: true,
			want: admitPlan{step: admitPool, route: deferred}, asked: []string{"pool"}},
		{name: "a run that found the pool busy under BlockingDiscard is discarded without reading the breaker",
			pool: here, poolBusy: true, open: true,
			want: admitPlan{step: admitDiscard}, asked: []string{"pool"}},
		{name: "an open breaker defers the run before its team's quotas are taken",
			pool: here, open: true,
			want: admitPlan{step: admitCircuitOpen}, asked: []string{"pool", "breaker"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var asked []string
			ask := func(name string) { asked = append(asked, name) }
			got := planAdmit(admitChecks{
				handler:       tc.handler,
				servesHandler: func() bool { ask("serves"); return tc.serves },
				needsRoute:    tc.needsRoute,
				route:         func() routePlan { ask("route"); return tc.route },
				pool:          func() routePlan { ask("pool"); return tc.pool },
				poolBusy:      tc.poolBusy,
				breakerOpen:   func() bool { ask("breaker"); return tc.open },
			})
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.asked, asked, "the checks asked, in order")
		})
	}
}
