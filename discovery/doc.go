// Package discovery tells who executes runs: every executor (a stock runner or
// a program built with package worker) announces itself on the compacted
// topic sundial.executors, and a Directory reads that topic into the set of
// live executors per pool.
//
// Membership is heartbeats on a compacted topic and nothing else: no
// election, no gossip, no acknowledgement between members.
//
//   - An Announcer writes its executor's ExecutorAnnouncement (pool, labels,
//     version, slots, runs in flight, CPU and memory use) every
//     Interval, keyed by the executor id, and a tombstone when it stops
//     cleanly. Heartbeats buffered when Stop cancels the loop fail, and
//     the producer fails the records behind them in the partition with
//     them: a tombstone failed that way is written again (tombstoneTimeout
//     bounds the whole write). Its goroutine is owned by Start/Stop.
//     Compaction keeps the
//     newest announcement of every executor and drops the tombstoned ones,
//     so the topic stays as small as the fleet.
//   - A Directory consumes every partition of the topic from the start, with
//     no consumer group: each reader sees every announcement, and none
//     depends on another. A member is live from an announcement until its
//     expiry bound passes without a newer one: ExpiryFactor (3) times the
//     heartbeat interval the member announced, measured from the member's
//     last heartbeat time, as read by the Directory's clock. A tombstone
//     ends it at once. The Directory checks expiries every Tick, so a member
//     that stops heartbeating (SIGKILL, a network partition) leaves the live
//     set at most ExpiryFactor × interval + Tick after its last heartbeat.
//   - The heartbeat time is the executor's clock: the bound holds when the
//     executors' and the reader's clocks agree to well within the bound. A
//     reader that reads an old announcement (at start, from the topic's
//     history) sees it already expired instead of alive for one bound.
//   - A member that left (tombstone) or expired stays listed, marked, for
//     DeadRetention after its last heartbeat, so an operator sees what
//     went away; it never counts as live.
//   - Live returns copies; a change (join, leave, expiry, or an update of a
//     live member's load) is signalled on the Changes channel, which holds
//     at most one pending signal: a reader re-reads Live after a signal
//     rather than counting them.
//
// The topic must exist when a Directory starts (`sundial migrate` creates
// it with the others); Synced is closed at once when it does not.
//
// The table of members (Table) is a pure core: announcements, tombstones and
// expiries are applied with the time as an argument, so the expiry bound is
// tested with a fake clock; the Directory is the shell that feeds it.
//
// CPU use is the process's user plus system time (getrusage on Unix, the Go
// runtime's estimate elsewhere) over the last interval, in cores; memory is
// the resident set size from /proc/self/statm on Linux and the memory the
// Go runtime has mapped elsewhere.
package discovery
