// Package routing chooses the executor of a run among the live members of
// its pool (package discovery), by the job's RoutingStrategy. It is a pure
// core: a Picker is given the run's routing and the live members, and
// returns a decision; the runner does the I/O (docs/architecture.md,
// "Pools and routing").
//
// Invariants:
//
//   - A decision names a member of the list it was given, or none: the
//     Picker never invents an executor, so a run is routed only to a member
//     that was live when it was routed.
//   - Round-robin is per Picker, per pool and per job (PickFor): one Picker
//     hands the members of a pool out to one job's runs in turn, in executor
//     id order, however other jobs' runs interleave, so a job's runs
//     alternate. Runs of one job are keyed by job id and so routed by one
//     runner at a time, which keeps a job's spread even. Fanned-out
//     children share their pool's turns (Pick).
//   - Least-loaded takes the members with the most free slots (announced
//     slots minus runs in flight) and hands those out in turn; a member that
//     announced no free slot is chosen only when no member has one.
//   - Fixed returns its executor only while it is live; otherwise
//     FALLBACK_ANY routes round-robin among the live members and
//     FALLBACK_WAIT returns Wait.
//   - BROADCAST and SHARDED runs are split, not picked: Broadcast plans one
//     child per member it is given (sorted, so the same members give the
//     same plan), Shard plans Routing.shards children handed out in turn.
//     A child's run id is derived from the base run id (BroadcastID,
//     ShardID) and never from time or order, so planning a redelivered
//     base run again yields the same ids. A child routed again uses
//     ChildRouting (its member, else any) and is never split again. The
//     runner records the broadcast plan and the finished children in
//     Redis; docs/architecture.md, "Broadcast and sharded runs", says why
//     that loses and doubles nothing.
//   - The choice is advisory for safety: the lease and the dedupe mark of the
//     run id still decide whether and where a run executes, so a wrong or
//     stale choice costs a redelivery, never a double effect.
//
// Random draws from an injected source; the Picker holds no global state and
// is safe for concurrent use.
package routing
