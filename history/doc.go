// Package history keeps the run history: a Writer consumes sundial.events in
// its own consumer group and stores the latest state of every attempt of
// every run in the store (store.History), which `sundial runs list` and
// JobSummary read (per job: last and next run, durations, failures,
// attempts). A record carries the event's owner team, wait reason and
// dispatched, received and leased times, so the store's run index lists a
// team's runs across jobs with how late each started and why.
//
// The Writer is off the hot path: runners produce events and never wait for
// history, and the Writer's group commits independently of theirs, so a
// Writer that falls behind (a slow or unreachable Cassandra) delays only
// what `sundial runs list` shows. It runs as its own process
// (`sundial history`), or inside `sundial runner --history` and the
// embedded pipeline for development.
//
// Invariants:
//
//   - Events are at least once and may arrive out of order across runners;
//     a record carries the event's time as UpdatedAt and the store keeps the
//     newest per (run, attempt), compared at microsecond precision, so a
//     replayed or late event never moves an attempt backwards. The runner
//     gives the events of one execution strictly increasing times.
//   - The writer gathers events: after a poll that returned some, it keeps
//     polling for Config.Gather (1 s) or until it holds
//     Config.MaxPollRecords. The events gathered are coalesced: of the
//     records of one (run, attempt), only the newest is written (of equal
//     times, the later in the partition), so a run whose STARTED and
//     outcome fall in one gather costs one row write, which at load is
//     nearly every run (polled as they came, most runs cost two). The
//     gather's records go to the store in one RecordRuns call, which
//     batches them per job partition.
//   - The broker holds the Writer's fetches until 64 KiB of events or
//     100 ms (fetchMinBytes, fetchMaxWait): answered record by record, a
//     consumer of a busy topic costs the broker hundreds of fetches a
//     second, and the Writer gathers for a second anyway.
//   - Offsets are committed only after every record of the gather is
//     stored, so a crash re-applies events rather than dropping them.
//   - Records is a pure mapping from one event to the records it writes;
//     the coalescer and the lag bookkeeping are pure too.
//
// Metrics (metrics.go) go to Config.Registerer: events read, records by
// result, records coalesced, batches, retried writes, the time from an
// event to its record stored, and the consumer lag in records and seconds
// (sundial_history_consumer_lag_records and _seconds, which the alert
// SundialHistoryBehind reads).
//
// Lifecycle: Start joins the group and Stop leaves it (internal/lifecycle).
// Stop is idempotent, safe before Start, and returns once the consuming
// goroutine has exited and the Kafka client is closed; records stored but
// not committed are stored again by the next member, which the store's
// newest-wins rule absorbs. A stopped Writer may be started again.
package history
