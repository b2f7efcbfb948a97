package routing

import (
	"slices"
	"strconv"

	"github.com/sundialhq/sundial/discovery"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// Child is one run of a fanned-out (BROADCAST or SHARDED) base run.
type Child struct {
	// RunID is derived from the base run id alone (and the member, for
	// BROADCAST), so every redelivery of the base run plans the same ids.
	RunID string
	// Index is the child's position among Count children, from 0.
	Index, Count int
	// Member is the executor the child is handed to.
	Member string
}

// FansOut reports whether r splits a run into child runs: BROADCAST or
// SHARDED.
func FansOut(r *sundialv1.Routing) bool {
	switch r.GetStrategy() {
	case sundialv1.RoutingStrategy_ROUTING_STRATEGY_BROADCAST, sundialv1.RoutingStrategy_ROUTING_STRATEGY_SHARDED:
		return true
	}
	return false
}

// BroadcastID is the run id of the BROADCAST child of base for member.
func BroadcastID(base, member string) string { return base + "/m/" + member }

// ShardID is the run id of shard i of the SHARDED run base.
func ShardID(base string, i int) string { return base + "/s/" + strconv.Itoa(i) }

// Broadcast plans one child per member of members, in executor id order
// (duplicates dropped), so the same members give the same plan whatever
// their order.
func Broadcast(base string, members []string) []Child {
	ids := slices.Clone(members)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	out := make([]Child, len(ids))
	for i, id := range ids {
		out[i] = Child{RunID: BroadcastID(base, id), Index: i, Count: len(ids), Member: id}
	}
	return out
}

// Shard plans the n shards of base, handing live, the live members of
// pool, out in turn (the pool's round-robin position carries on from shard
// to shard and run to run). It returns nil when live is empty or n < 1.
func (p *Picker) Shard(pool, base string, n int, live []discovery.Member) []Child {
	if len(live) == 0 || n < 1 {
		return nil
	}
	rr := &sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_ROUND_ROBIN}
	out := make([]Child, n)
	for i := range out {
		out[i] = Child{RunID: ShardID(base, i), Index: i, Count: n, Member: p.Pick(pool, rr, live).Member}
	}
	return out
}

// ChildRouting is how a child run that must be routed again (a retry, a
// deferral, or one adopted from a member that left) finds an executor: the
// member it was handed to while that member is live, else any live member
// in turn. A child is never fanned out again.
func ChildRouting(run *sundialv1.Run) *sundialv1.Routing {
	if run.GetRoutedTo() == "" {
		return &sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_ROUND_ROBIN}
	}
	return &sundialv1.Routing{
		Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_FIXED, Executor: run.GetRoutedTo(),
		Fallback: sundialv1.RoutingFallback_ROUTING_FALLBACK_ANY,
	}
}
