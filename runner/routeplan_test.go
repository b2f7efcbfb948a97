package runner

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sundialhq/sundial/routing"
)

func TestPlanRouteSendsARunToOneExecutorOrDefersIt(t *testing.T) {
	t.Parallel()
	chosen := func(member string) routing.Decision { return routing.Decision{Outcome: routing.Chosen, Member: member} }
	for _, tc := range []struct {
		name    string
		fansOut bool
		live    int
		pick    routing.Decision
		want    routePlan
		picked  bool
	}{
		{name: "a run the Picker gives to this runner is executed here",
			live: 2, pick: chosen("self"), want: routePlan{step: routeHere}, picked: true},
		{name: "a run the Picker gives to another member is handed over to it",
			live: 2, pick: chosen("r2"), want: routePlan{step: routeHandOver, member: "r2"}, picked: true},
		{name: "a run whose pool has no live member is deferred as no_executor",
			pick: routing.Decision{Outcome: routing.NoMember}, want: routePlan{step: routeDefer, reason: reasonNoExecutor}, picked: true},
		{name: "a fixed run whose member is away under FALLBACK_WAIT is deferred as executor_not_live",
			live: 1, pick: routing.Decision{Outcome: routing.Wait}, want: routePlan{step: routeDefer, reason: reasonWaitExecutor}, picked: true},
		{name: "a base run that fans out is split into children without asking the Picker",
			fansOut: true, live: 3, want: routePlan{step: routeFanOut}},
		{name: "a base run that fans out with no live member is deferred as no_executor",
			fansOut: true, want: routePlan{step: routeDefer, reason: reasonNoExecutor}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			picked := false
			got := planRoute(tc.fansOut, tc.live, func() routing.Decision { picked = true; return tc.pick }, "self")
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.picked, picked, "whether the Picker was asked (a pick moves a round-robin's turn)")
		})
	}
}
