package routing_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/discovery"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/routing"
)

func members(free ...int) []discovery.Member {
	out := make([]discovery.Member, len(free))
	ids := []string{"c", "a", "b", "d"} // out of order: the Picker sorts
	for i, f := range free {
		out[i] = discovery.Member{ID: ids[i], Pool: "p", Capacity: 4, InFlight: 4 - f}
	}
	return out
}

func strategy(s sundialv1.RoutingStrategy) *sundialv1.Routing {
	return &sundialv1.Routing{Strategy: s}
}

func counts(p *routing.Picker, r *sundialv1.Routing, live []discovery.Member, n int) map[string]int {
	got := map[string]int{}
	for range n {
		d := p.Pick("p", r, live)
		if d.Outcome == routing.Chosen {
			got[d.Member]++
		}
	}
	return got
}

func TestPick(t *testing.T) {
	t.Parallel()
	fixed := func(id string, fb sundialv1.RoutingFallback) *sundialv1.Routing {
		return &sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_FIXED, Executor: id, Fallback: fb}
	}
	cases := []struct {
		name    string
		routing *sundialv1.Routing
		live    []discovery.Member
		n       int
		want    map[string]int
	}{
		{"round-robin spreads evenly", strategy(sundialv1.RoutingStrategy_ROUTING_STRATEGY_ROUND_ROBIN), members(1, 1, 1), 9, map[string]int{"a": 3, "b": 3, "c": 3}},
		{"least-loaded avoids the busy member", strategy(sundialv1.RoutingStrategy_ROUTING_STRATEGY_LEAST_LOADED), members(0, 2, 2), 6, map[string]int{"a": 3, "b": 3}},
		{"least-loaded takes the freest", strategy(sundialv1.RoutingStrategy_ROUTING_STRATEGY_LEAST_LOADED), members(3, 1, 2), 4, map[string]int{"c": 4}},
		{"least-loaded with all busy still routes", strategy(sundialv1.RoutingStrategy_ROUTING_STRATEGY_LEAST_LOADED), members(0, 0), 2, map[string]int{"a": 1, "c": 1}},
		{"fixed lands on its member", fixed("b", 0), members(1, 1, 1), 5, map[string]int{"b": 5}},
		{"fixed falls back to any live member", fixed("gone", sundialv1.RoutingFallback_ROUTING_FALLBACK_ANY), members(1, 1), 4, map[string]int{"a": 2, "c": 2}},
		{"fixed waits for its member", fixed("gone", sundialv1.RoutingFallback_ROUTING_FALLBACK_WAIT), members(1, 1), 4, map[string]int{}},
		{"no member", strategy(sundialv1.RoutingStrategy_ROUTING_STRATEGY_ROUND_ROBIN), nil, 3, map[string]int{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := routing.NewPicker(rand.NewPCG(1, 2))
			assert.Equal(t, c.want, counts(p, c.routing, c.live, c.n))
		})
	}
}

func TestPickOutcomes(t *testing.T) {
	t.Parallel()
	p := routing.NewPicker(rand.NewPCG(1, 2))
	wait := &sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_FIXED, Executor: "x", Fallback: sundialv1.RoutingFallback_ROUTING_FALLBACK_WAIT}
	assert.Equal(t, routing.Decision{Outcome: routing.Wait}, p.Pick("p", wait, members(1)))
	any := &sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_FIXED, Executor: "x"}
	assert.Equal(t, routing.Decision{Outcome: routing.NoMember}, p.Pick("p", any, nil))
	assert.True(t, routing.Routed(any))
	assert.False(t, routing.Routed(nil))
}

func TestPickRandomStaysAmongLiveMembers(t *testing.T) {
	t.Parallel()
	p := routing.NewPicker(rand.NewPCG(7, 9))
	got := counts(p, strategy(sundialv1.RoutingStrategy_ROUTING_STRATEGY_RANDOM), members(1, 1, 1), 300)
	require.Len(t, got, 3, "every member drawn at least once in 300 draws: %v", got)
	assert.Equal(t, 300, got["a"]+got["b"]+got["c"])
}

// One job's round-robin runs alternate over the pool's members however
// another job's runs interleave with them. With turns per pool, job a got
// w1, w1, w1 here.
func TestRoundRobinAlternatesPerJob(t *testing.T) {
	t.Parallel()
	p := routing.NewPicker(rand.NewPCG(1, 2))
	rr := strategy(sundialv1.RoutingStrategy_ROUTING_STRATEGY_ROUND_ROBIN)
	live := members(1, 1)
	var a, b []string
	for range 3 {
		a = append(a, p.PickFor("p", "team.a", rr, live).Member)
		b = append(b, p.PickFor("p", "team.b", rr, live).Member)
	}
	assert.Equal(t, []string{a[0], a[1], a[0]}, a)
	assert.NotEqual(t, a[0], a[1], "job a alternates")
	assert.NotEqual(t, b[0], b[1], "job b alternates")
}
