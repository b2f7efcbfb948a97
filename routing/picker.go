package routing

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/sundialhq/sundial/discovery"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// Outcome is what a Picker decided for a run.
type Outcome int

const (
	// Chosen means the run goes to Decision.Member.
	Chosen Outcome = iota
	// NoMember means the pool has no live member; the run must wait and
	// ask again.
	NoMember
	// Wait means a FIXED run whose executor is not live, with FALLBACK_WAIT.
	Wait
)

// Decision is a Picker's answer for one run.
type Decision struct {
	Outcome Outcome
	// Member is the chosen executor id when Outcome is Chosen.
	Member string
}

// Picker chooses executors. The zero value is not usable; use NewPicker.
type Picker struct {
	mu   sync.Mutex
	next map[turnKey]uint64 // round-robin position
	rand *rand.Rand
}

// NewPicker returns a Picker drawing RANDOM choices from src.
func NewPicker(src rand.Source) *Picker {
	return &Picker{next: map[turnKey]uint64{}, rand: rand.New(src)}
}

// Routed reports whether r asks for an executor to be chosen: any strategy
// but UNSPECIFIED (partitioned by job id).
func Routed(r *sundialv1.Routing) bool {
	return r.GetStrategy() != sundialv1.RoutingStrategy_ROUTING_STRATEGY_UNSPECIFIED
}

// turnKey is whose turns a round-robin position counts: one job's runs in
// one pool (job "" for a pool's shared turns, as fanned-out children use).
type turnKey struct{ pool, job string }

// Pick chooses among live, the live members of pool, for a run routed by r,
// taking turns per pool. The order of live does not matter.
func (p *Picker) Pick(pool string, r *sundialv1.Routing, live []discovery.Member) Decision {
	return p.PickFor(pool, "", r, live)
}

// PickFor is Pick for a run of job: ROUND_ROBIN (and LEAST_LOADED's ties)
// take turns per job, so that one job's runs alternate over the pool's
// members however other jobs' runs interleave with them.
func (p *Picker) PickFor(pool, job string, r *sundialv1.Routing, live []discovery.Member) Decision {
	if r.GetStrategy() == sundialv1.RoutingStrategy_ROUTING_STRATEGY_FIXED {
		for _, m := range live {
			if m.ID == r.GetExecutor() {
				return Decision{Outcome: Chosen, Member: m.ID}
			}
		}
		if r.GetFallback() == sundialv1.RoutingFallback_ROUTING_FALLBACK_WAIT {
			return Decision{Outcome: Wait}
		}
	}
	if len(live) == 0 {
		return Decision{Outcome: NoMember}
	}
	members := slices.Clone(live)
	slices.SortFunc(members, func(a, b discovery.Member) int { return cmp.Compare(a.ID, b.ID) })
	switch r.GetStrategy() {
	case sundialv1.RoutingStrategy_ROUTING_STRATEGY_RANDOM:
		p.mu.Lock()
		defer p.mu.Unlock()
		return Decision{Outcome: Chosen, Member: members[p.rand.IntN(len(members))].ID}
	case sundialv1.RoutingStrategy_ROUTING_STRATEGY_LEAST_LOADED:
		most := 0
		for _, m := range members {
			most = max(most, m.Free())
		}
		members = slices.DeleteFunc(members, func(m discovery.Member) bool { return m.Free() < most })
	}
	return Decision{Outcome: Chosen, Member: p.turn(turnKey{pool, job}, members)}
}

// turn hands the members out in turn, per key.
func (p *Picker) turn(key turnKey, members []discovery.Member) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := p.next[key]
	p.next[key] = i + 1
	return members[i%uint64(len(members))].ID
}
