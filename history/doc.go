// Package history keeps the run history: a Writer consumes sundial.events in
// its own consumer group and stores the latest state of every attempt of
// every run in the store (store.History.RecordRun), which `sundial runs list`
// and JobSummary read (per job: last and next run, durations, failures,
// attempts).
//
// Invariants:
//
//   - Events are at least once and may arrive out of order across runners;
//     a record carries the event's time as UpdatedAt and the store keeps the
//     newest per (run, attempt), so a replayed or late event never moves an
//     attempt backwards.
//   - Offsets are committed only after every record of the poll is stored,
//     so a crash re-applies events rather than dropping them.
//   - Records is a pure mapping from one event to the records it writes.
//
// Metrics (metrics.go) go to Config.Registerer: events read, records by
// result, retried writes, and the lag from an event to its record stored.
//
// Lifecycle: Start joins the group and Stop leaves it (internal/lifecycle).
// Stop is idempotent, safe before Start, and returns once the consuming
// goroutine has exited and the Kafka client is closed; records stored but
// not committed are stored again by the next member, which the store's
// newest-wins rule absorbs. A stopped Writer may be started again.
package history
