// Package startoffsetstest stages, on a kfake cluster, the race that package
// startoffsets exists for: a record appended to a quiet partition right
// after the broker answered a reader's lookup by time ("nothing there"),
// before the reader looked up the partition's end. A reader that starts at
// an end looked up after the append skips the record for good. The tests
// of every reader that finds its start by time (the client's WaitStatus,
// the load generator's observer, a dispatcher in a new group, the
// operator's events follower, Since itself) stage it.
//
// # Invariants
//
//   - The record is written once, by a client with connections of its own,
//     while the broker holds the first request it handles after answering
//     the reader's first lookup by time of the topic.
//   - A reader has skipped the record once the lowest offset it ever
//     fetched of the record's partition is past the record: readers never
//     go back, so nothing would bring the record back.
//   - The race depends on the order in which the lookups reach the broker,
//     so a test runs it for several rounds (Rounds), each on a new cluster.
package startoffsetstest
