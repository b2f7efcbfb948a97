// Package consume processes the records of a Kafka consumer group at least
// once, in order per key, with bounded concurrency across keys. The registry
// (sundial.jobs) and the trigger path (sundial.triggers) are built on it.
//
// # Invariants
//
//   - Order: records with the same key (the same job) are handled one after
//     the other, in offset order; records with different keys may be handled
//     concurrently (at most Concurrency at a time).
//   - At least once: a poll's offsets are committed only after every record
//     of the poll has been handled and every output record the handler asked
//     for (a status, an event) has been acknowledged by Kafka. A crash or a
//     lost partition before that redelivers the records, so handlers must be
//     idempotent.
//   - No poison: the handler decides what a record means and never fails;
//     it retries transient errors itself (backoff.Retry) and turns a bad record into
//     an output that says so. Output records are produced until Kafka takes
//     them. Only Stop (context cancellation) ends processing early, and then
//     nothing of the unfinished poll is committed. A poll whose answers are
//     all out when Stop comes is still committed (for up to 5 s), so a
//     graceful restart does not answer its records again.
//   - LeaveStatic is how every consumer group member of Sundial stops: a
//     static member (kgo.InstanceID) leaves on a stop as a dynamic one
//     does, and keeps its assignment only across a crash.
//   - Rebalances wait for the poll in hand (kgo.BlockRebalanceOnPoll), so a
//     commit never lands after the partition moved to another member.
//   - A commit the group refuses because this member's generation is over
//     (GenerationEnded: the member was dropped, fenced, or the group is
//     rebalancing) is abandoned, not retried: the member rejoins only once
//     the poll allows a rebalance, so retrying would hold the partitions
//     for ever. A later commit covers the poll's records if the member
//     keeps their partitions; their next owner handles them again if not.
//     CommitPoll is that rule; Loop and the DAG
//     engine's events loop commit through it. (Before it, a DAG engine
//     whose session expired while Kafka was down retried its commit for
//     the last nine minutes of a chaos run, and its DAG runs stood still.)
//   - Every group of Sundial that reads several topics shares each topic
//     among its members (PerTopicBalancer, cooperative): two runners each
//     read half of sundial.runs.default, not one all of it and the other
//     all of sundial.runs.high, as kgo's cooperative-sticky balancer, which
//     balances the sum of the partitions, had them.
package consume
