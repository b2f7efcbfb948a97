package jobspec

import (
	"fmt"
	"regexp"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// DefaultPool is the pool of a job that names none.
const DefaultPool = "default"

// MaxPoolLength is the longest pool name, and MaxExecutorIDLength the
// longest executor id a FIXED routing may name.
const (
	MaxPoolLength       = 64
	MaxExecutorIDLength = 200
)

// MaxShards is the most shards Routing.shards may ask for: each shard is a
// child run with its own lease, events and dedupe mark.
const MaxShards = 1024

// poolPattern keeps pool names usable in a topic name
// (sundial.runs.direct.<executor> is per executor, but metrics and the
// directory are labelled by pool).
var poolPattern = regexp.MustCompile(`^[a-z0-9_-]+$`)

// executorPattern keeps executor ids usable in a topic name: a FIXED run
// travels on sundial.runs.direct.<executor>.
var executorPattern = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// PoolOf returns the pool of a job or a run: its own, or DefaultPool.
func PoolOf(pool string) string {
	if pool == "" {
		return DefaultPool
	}
	return pool
}

// CheckPool returns why p cannot be a pool's name, or "" when it can; the
// empty name is DefaultPool's.
func CheckPool(p string) string {
	switch {
	case len(p) > MaxPoolLength:
		return fmt.Sprintf("%d characters, at most %d allowed", len(p), MaxPoolLength)
	case p != "" && !poolPattern.MatchString(p):
		return fmt.Sprintf("%q has characters outside [a-z0-9_-]", p)
	}
	return ""
}

// CheckExecutorID returns why id cannot be an executor id that runs are
// routed to, or "" when it can.
func CheckExecutorID(id string) string {
	switch {
	case id == "":
		return "required"
	case len(id) > MaxExecutorIDLength:
		return "too long: at most 200 characters allowed"
	case !executorPattern.MatchString(id):
		return "characters outside [A-Za-z0-9._-] (it names a Kafka topic)"
	}
	return ""
}

func (v *validator) routing(spec *sundialv1.JobSpec) {
	if why := CheckPool(spec.GetPool()); why != "" {
		v.add("pool", "%s", why)
	}
	r := spec.GetRouting()
	if r == nil {
		return
	}
	s := r.GetStrategy()
	if !definedEnum(sundialv1.RoutingStrategy_name, int32(s)) {
		v.add("routing.strategy", "unknown strategy %d: want ROUND_ROBIN, RANDOM, LEAST_LOADED, FIXED, BROADCAST or SHARDED", int32(s))
		return
	}
	if !definedEnum(sundialv1.RoutingFallback_name, int32(r.GetFallback())) {
		v.add("routing.fallback", "unknown fallback %d: want ANY or WAIT", int32(r.GetFallback()))
	}
	v.fanout(spec)
	if s != sundialv1.RoutingStrategy_ROUTING_STRATEGY_FIXED {
		if r.GetExecutor() != "" {
			v.add("routing.executor", "only allowed with strategy ROUTING_STRATEGY_FIXED")
		}
		if r.GetFallback() != sundialv1.RoutingFallback_ROUTING_FALLBACK_UNSPECIFIED {
			v.add("routing.fallback", "only allowed with strategy ROUTING_STRATEGY_FIXED")
		}
		return
	}
	if reason := CheckExecutorID(r.GetExecutor()); reason != "" {
		v.add("routing.executor", "%s (strategy ROUTING_STRATEGY_FIXED names the executor its runs go to)", reason)
	}
}

// fanout checks what BROADCAST and SHARDED ask of the rest of the spec.
// Their child runs are runs of the job, leased under its slots: under
// FORBID or REPLACE a child would skip or cancel its siblings, and the base
// run, which succeeds only when every child has, would never end. ALLOW
// and QUEUE (children wait their turn) are accepted.
func (v *validator) fanout(spec *sundialv1.JobSpec) {
	r := spec.GetRouting()
	s := r.GetStrategy()
	sharded := s == sundialv1.RoutingStrategy_ROUTING_STRATEGY_SHARDED
	switch n := r.GetShards(); {
	case !sharded && n != 0:
		v.add("routing.shards", "only allowed with strategy ROUTING_STRATEGY_SHARDED")
	case sharded && n < 1:
		v.add("routing.shards", "required with strategy ROUTING_STRATEGY_SHARDED: from 1 to %d", MaxShards)
	case sharded && n > MaxShards:
		v.add("routing.shards", "%d shards, at most %d allowed", n, MaxShards)
	}
	if !sharded && s != sundialv1.RoutingStrategy_ROUTING_STRATEGY_BROADCAST {
		return
	}
	p := spec.GetOverlapPolicy()
	if p == sundialv1.OverlapPolicy_OVERLAP_POLICY_UNSPECIFIED && spec.GetConcurrencyLimit() > 0 {
		p = sundialv1.OverlapPolicy_OVERLAP_POLICY_FORBID
	}
	switch p {
	case sundialv1.OverlapPolicy_OVERLAP_POLICY_FORBID, sundialv1.OverlapPolicy_OVERLAP_POLICY_REPLACE:
		v.add("overlap_policy", "%s with strategy %s: its child runs share the job's slots and would skip or replace each other; choose ALLOW or QUEUE", p, s)
	}
}
