package jobspec

import (
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
	if p := spec.GetPool(); p != "" {
		switch {
		case len(p) > MaxPoolLength:
			v.add("pool", "%d characters, at most %d allowed", len(p), MaxPoolLength)
		case !poolPattern.MatchString(p):
			v.add("pool", "%q has characters outside [a-z0-9_-]", p)
		}
	}
	r := spec.GetRouting()
	if r == nil {
		return
	}
	s := r.GetStrategy()
	if !definedEnum(sundialv1.RoutingStrategy_name, int32(s)) {
		v.add("routing.strategy", "unknown strategy %d: want ROUND_ROBIN, RANDOM, LEAST_LOADED or FIXED", int32(s))
		return
	}
	if !definedEnum(sundialv1.RoutingFallback_name, int32(r.GetFallback())) {
		v.add("routing.fallback", "unknown fallback %d: want ANY or WAIT", int32(r.GetFallback()))
	}
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
