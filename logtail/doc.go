// Package logtail carries the log lines of a running attempt from the
// runner that executes it to the API that tails it, through Redis, so that
// an operator sees a long run's output while it runs rather than when its
// attempt ends.
//
// The runner's Shipper takes every line an attempt's target.Output keeps
// (a handler's run logger, an exec target's output: the same lines, cut at
// target.MaxOutputLineBytes, that the attempt's final event carries) and
// writes them, once per Bounds.Every for all the runner's attempts in one
// pipelined round trip, to one Redis stream per attempt
// (<runner key prefix>{<job>}:log:<run>:<attempt>). The API's Reader reads
// a stream from an offset (a stream entry id); the run service's
// TailRunLog polls it for a caller who may see the run.
//
// A team's SDK worker executes its attempts far from the runner that
// holds them (the worker gateway's, package gateway). It keeps each
// running attempt's new lines in a Pending, bounded by the bounds the
// gateway tells it, and sends them about once per Bounds.Every; the
// gateway hands them to the attempt's target.Output (Live), so they reach
// the gateway runner's Tail and Shipper as a handler's own lines do, and
// are bounded again there. Pending is the one home of the bounding rule
// for both.
//
// Invariants:
//
//   - Nothing of it is on an attempt's path: Tail.Line appends to memory
//     under a mutex and never waits on Redis; the Shipper's one goroutine
//     writes. A failed write loses that chunk of the tail (it is logged),
//     never the attempt: the final event still carries the attempt's log.
//   - An attempt that logs nothing costs no Redis call. One that logs costs
//     at most one stream entry per Bounds.Every, sharing one round trip with
//     every other attempt of the runner.
//   - Bounded whatever the attempt writes: one entry holds at most
//     Bounds.ChunkBytes (lines past it until the next write are counted as
//     dropped, never queued), one attempt ships at most Bounds.AttemptBytes
//     in all (past it lines are counted, not shipped), a stream keeps at
//     most about MaxEntries entries, and Redis forgets a stream
//     Bounds.Retain after its last write. An attempt printing 100 MB ships
//     at most AttemptBytes and Redis holds at most that.
//   - The end of an attempt that shipped anything is an entry of its own
//     (or the last chunk's "end" field): a tail ends when it reads it. An
//     attempt that shipped nothing has no stream; the API then learns from
//     the history that it ended.
//   - The lines are the attempt's log as package runner/target keeps it,
//     with whatever redaction that applies; this package adds no text but
//     its own notes of dropped lines. Who may read a stream is the API's
//     rule (the run's team, any role that may read its run), not this
//     package's.
package logtail
