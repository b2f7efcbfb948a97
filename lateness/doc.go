// Package lateness explains why a run started late: the closed set of
// reasons a run waits for (Reason), the rule that names the wait between a
// run's dispatch and its receipt by a runner (ReceiptWait), the mapping of
// the runner's DEFERRED reasons onto that set (OfDeferral), and the
// breakdown of one attempt's timing into its gaps (Breakdown). It is pure:
// every function takes the times it judges as arguments.
//
// # The timeline of an attempt
//
//	due ─► dispatched ─► received ─► leased ─► started
//
// due is the attempt's due time (a run's occurrence, or a retry's or
// deferral's new due time); dispatched is when the dispatcher wrote the run
// record (its ENQUEUED event, Run.dispatched_at); received is when a runner
// fetched the record; leased when that runner held the run's lease;
// started when the attempt began executing. Every gap is a wait with a
// cause:
//
//   - due → dispatched: the dispatcher fires a run when it is due (a
//     splayed run when its splay is over: that is its attempt's due time);
//     a gap longer than the bound is a catch-up ("catch_up": Run.origin
//     CATCH_UP, the run was missed, by an outage or while a shard changed
//     hands, and fired by the misfire policy), or the dispatcher's own delay
//     ("dispatch_delay": a trigger, retry or DAG node fired late while its
//     shard had no owner, or a busy dispatcher) (DispatchWait).
//   - dispatched → received: the record waited in Kafka. ReceiptWait names
//     it: longer than the bound, it is "no_executor" when no executor was
//     live when the run was dispatched (LiveAt: none had started by then,
//     or every one that had was gone, its last heartbeat before it), and
//     "backlog" when one was (the runners were behind).
//   - received → leased: the record waited in the runner's queues for a
//     worker and a pool slot ("pool_full" beyond the bound).
//   - a DEFERRED event ends a delivery without an attempt and names its
//     wait by OfDeferral: team_quota, team_rate, overlap, breaker_open,
//     no_executor (a routed run with no live member in its pool), no_worker
//     (a worker gateway with no connected worker).
//
// # Invariants
//
//   - Every reason a runner writes to RunEvent.wait_reason is one of
//     Reasons; nothing else names a wait.
//   - ReceiptWait and the queue wait name a gap only when it exceeds the
//     bound the caller gives (the runner's Config.WaitBound), so the
//     ordinary milliseconds of a healthy pipeline carry no reason.
//   - A delivery reports one reason: the one of its longest gap beyond the
//     bound (Longest).
package lateness
