package lateness

import (
	"time"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// Reason names why a run waited. The empty Reason means it did not.
type Reason string

// The closed set of wait reasons (RunEvent.wait_reason).
const (
	None Reason = ""
	// NoExecutor: no runner was live to fetch the run, or a routed run's
	// pool had no live member.
	NoExecutor Reason = "no_executor"
	// NoWorker: a worker gateway had no connected worker for the run.
	NoWorker Reason = "no_worker"
	// PoolFull: the run waited in a runner's queues for a worker or a pool
	// slot.
	PoolFull Reason = "pool_full"
	// PoolBusy: a discard pool had no free slot; the run was skipped.
	PoolBusy Reason = "pool_busy"
	// TeamQuota: the team's max_concurrent_runs was reached.
	TeamQuota Reason = "team_quota"
	// TeamRate: the team's max_runs_per_minute was reached.
	TeamRate Reason = "team_rate"
	// Overlap: the job's concurrency slots were full (overlap QUEUE).
	Overlap Reason = "overlap"
	// BreakerOpen: the circuit breaker of the team's downstream was open.
	BreakerOpen Reason = "breaker_open"
	// Backlog: runners were live but behind: the record waited in Kafka.
	Backlog Reason = "backlog"
	// CatchUp: the run was missed and fired late by the misfire policy,
	// after an outage or a shard's take-over.
	CatchUp Reason = "catch_up"
	// DispatchDelay: the dispatcher wrote a run that was not a catch-up
	// late: its shard had no owner for a while (a trigger, a retry or a
	// DAG node is fired late, never caught up), or the dispatcher was
	// behind (a busy shard, a slow store or Kafka).
	DispatchDelay Reason = "dispatch_delay"
)

// Reasons lists every Reason but None, in the order the docs give them.
var Reasons = []Reason{NoExecutor, NoWorker, PoolFull, PoolBusy, TeamQuota, TeamRate, Overlap, BreakerOpen, Backlog, CatchUp, DispatchDelay}

// Valid reports whether r is None or one of Reasons.
func (r Reason) Valid() bool {
	if r == None {
		return true
	}
	for _, k := range Reasons {
		if r == k {
			return true
		}
	}
	return false
}

// Text is how the CLI prints r: its words, or "-" for None.
func (r Reason) Text() string {
	if r == None {
		return "-"
	}
	b := []byte(r)
	for i, c := range b {
		if c == '_' {
			b[i] = ' '
		}
	}
	return string(b)
}

// deferrals maps the reasons of the runner's DEFERRED and SKIPPED events
// (RunEvent.reason) that are waits onto the closed set.
var deferrals = map[string]Reason{
	"no_executor":       NoExecutor,
	"executor_not_live": NoExecutor,
	"no_worker":         NoWorker,
	"pool_busy":         PoolBusy,
	"team_quota":        TeamQuota,
	"team_rate":         TeamRate,
	"overlap_queue":     Overlap,
	"circuit_open":      BreakerOpen,
}

// OfDeferral returns the wait a DEFERRED (or pool_busy SKIPPED) event's
// reason names, or None for a reason that is no wait.
func OfDeferral(eventReason string) Reason { return deferrals[eventReason] }

// ReceiptWait names the wait of a record between dispatched and received:
// None when it is not longer than bound (or a time is unknown), NoExecutor
// when no executor was live at dispatched, Backlog when one was.
func ReceiptWait(dispatched, received time.Time, bound time.Duration, liveAtDispatch bool) Reason {
	if dispatched.IsZero() || received.IsZero() || received.Sub(dispatched) <= bound {
		return None
	}
	if !liveAtDispatch {
		return NoExecutor
	}
	return Backlog
}

// Member is what LiveAt needs of an executor: when it started and, when it
// left or stopped announcing, its last heartbeat.
type Member struct {
	Started time.Time
	// Gone is set when the member left or expired; LastSeen is then its
	// last heartbeat.
	Gone     bool
	LastSeen time.Time
}

// LiveAt reports whether any of members was live at t: started at or
// before t, and not gone before t.
func LiveAt(members []Member, t time.Time) bool {
	for _, m := range members {
		if m.Started.After(t) {
			continue
		}
		if m.Gone && m.LastSeen.Before(t) {
			continue
		}
		return true
	}
	return false
}

// DispatchWait names the wait between due and dispatched when it is longer
// than bound: CatchUp for a run the misfire policy fired late, DispatchDelay
// for any other (the dispatcher's own delay); None when it is not longer or
// a time is unknown.
func DispatchWait(origin sundialv1.RunOrigin, due, dispatched time.Time, bound time.Duration) Reason {
	if due.IsZero() || dispatched.IsZero() || dispatched.Sub(due) <= bound {
		return None
	}
	if origin == sundialv1.RunOrigin_RUN_ORIGIN_CATCH_UP {
		return CatchUp
	}
	return DispatchDelay
}

// QueueWait names the wait between received and leased: PoolFull when it
// is longer than bound.
func QueueWait(received, leased time.Time, bound time.Duration) Reason {
	if received.IsZero() || leased.IsZero() || leased.Sub(received) <= bound {
		return None
	}
	return PoolFull
}

// Wait is one named gap.
type Wait struct {
	Reason Reason
	For    time.Duration
}

// Longest returns the reason of the longest of waits that has one, or
// None.
func Longest(waits ...Wait) Reason {
	var best Wait
	for _, w := range waits {
		if w.Reason != None && w.For > best.For {
			best = w
		}
	}
	return best.Reason
}
