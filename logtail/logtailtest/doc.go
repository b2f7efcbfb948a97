// Package logtailtest serves and follows live log tails in tests: a run
// service that answers TailRunLog from the runners' Redis streams for the
// runs of a few job definitions, and a reader of its stream. The tests of
// the runner's tails (package logtail) and of the worker gateway's
// (package gateway) share it.
//
// Invariants:
//
//   - The run service has no history: TailRunLog answers from the live
//     tails only, and reads a run's team from the definitions it is
//     given, so a test's caller of another team gets not_found as the
//     API's would.
//   - Follow counts a line's bytes with its newline, as logtail.Bounds
//     counts them, so a test compares what it received with the bounds.
package logtailtest
