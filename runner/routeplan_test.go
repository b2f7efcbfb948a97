package runner

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/discovery"
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

func TestPlanPoolSendsAnUnroutedRunToItsJobsPool(t *testing.T) {
	t.Parallel()
	member := func(id, pool string) discovery.Member {
		return discovery.Member{ID: id, Pool: pool, State: discovery.Live}
	}
	billing := []discovery.Member{member("b1", "billing"), member("b2", "billing"), member("b3", "billing")}
	// chosen is the member planPool must choose for job among billing:
	// the one that ranks highest, whatever the order of the list.
	chosen := func(job string) string {
		best := ""
		for _, m := range billing {
			if best == "" || rendezvous(job, m.ID) > rendezvous(job, best) {
				best = m.ID
			}
		}
		return best
	}
	for _, tc := range []struct {
		name       string
		pool, self string
		live       []discovery.Member
		want       routePlan
		asked      bool
	}{
		{name: "a run of this runner's pool executes here without reading the directory (the default setup)",
			pool: "default", self: "default", live: billing, want: routePlan{step: routeHere}},
		{name: "a run of another pool is handed over to the member of that pool its job ranks highest",
			pool: "billing", self: "default", live: billing, want: routePlan{step: routeHandOver, member: chosen("billing.nightly")}, asked: true},
		{name: "the choice does not depend on the order of the live members",
			pool: "billing", self: "default", live: []discovery.Member{billing[2], billing[0], billing[1]},
			want: routePlan{step: routeHandOver, member: chosen("billing.nightly")}, asked: true},
		{name: "a run of another pool with no live member there is deferred as no_executor",
			pool: "billing", self: "default", live: nil, want: routePlan{step: routeDefer, reason: reasonNoExecutor}, asked: true},
		{name: "members of other pools and ids that cannot name a directed topic are never chosen",
			pool: "billing", self: "default",
			live: []discovery.Member{member("d1", "default"), member("bad id", "billing"), member("self", "billing")},
			want: routePlan{step: routeDefer, reason: reasonNoExecutor}, asked: true},
		{name: "a runner of a named pool hands a default pool's run over to the default pool",
			pool: "default", self: "billing", live: []discovery.Member{member("d1", "default")},
			want: routePlan{step: routeHandOver, member: "d1"}, asked: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			asked := false
			got := planPool(tc.pool, tc.self, "self", "billing.nightly", func() []discovery.Member { asked = true; return tc.live })
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.asked, asked, "whether the directory was read")
		})
	}
}

// TestPlanPoolKeepsAJobOnOneMemberAndSpreadsJobs: one job's runs always go
// to the same member, a member leaving moves only the jobs it had, and
// many jobs spread over every member.
func TestPlanPoolKeepsAJobOnOneMemberAndSpreadsJobs(t *testing.T) {
	t.Parallel()
	var live []discovery.Member
	for _, id := range []string{"b1", "b2", "b3", "b4"} {
		live = append(live, discovery.Member{ID: id, Pool: "billing", State: discovery.Live})
	}
	place := func(job string, live []discovery.Member) string {
		return planPool("billing", "default", "self", job, func() []discovery.Member { return live }).member
	}
	per := map[string]int{}
	for i := range 400 {
		job := fmt.Sprintf("billing.job-%d", i)
		m := place(job, live)
		require.Equal(t, m, place(job, live), "job %s", job)
		per[m]++
		without := slices.DeleteFunc(slices.Clone(live), func(x discovery.Member) bool { return x.ID == "b4" })
		if m != "b4" {
			assert.Equal(t, m, place(job, without), "job %s moved though its member stayed", job)
		}
	}
	for _, m := range live {
		assert.Greater(t, per[m.ID], 50, "member %s got too few of 400 jobs: %v", m.ID, per)
	}
}
