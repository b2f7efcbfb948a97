// Package deadletter reads the dead-letter topic (sundial.dlq) and turns dead
// runs back into due entries for replay.
//
// A replay keeps the run id, so the downstream still sees one idempotency
// key for the run. A dead run never completed, so leasing holds no dedupe
// mark for it and nothing has to be cleared: the replayed run takes a lease
// like any other. The replay is a KindRetry due entry due now, carrying the
// Run as a new attempt (the dead one's plus one, with
// attempts_before_replay saying how many came before, so the run's history
// keeps the earlier attempts and the retry policy gives the replay the
// job's whole budget) and origin RUN_ORIGIN_REPLAY, written through the
// enqueuer, so the dispatcher fires it like any retry. A run dead more than
// once is replayed once, from its newest dead letter.
//
// A replay runs with the job's current definition, not the one the run was
// made from: the fix an operator applied before replaying is what runs.
// WithDefinition is that rule, used by the API and the CLI alike; a job that
// is gone is not replayed.
//
// A run the dispatcher could not write to its runs topic because Kafka
// refused the record for good is dead-lettered by the dispatcher, with one
// of the codes below. A run refused as too large (CodeRecordTooLarge) is
// kept without its payload and target, which are what made it too large:
// its replay carries no run, so the dispatcher builds the run again from
// the job's definition in force (one the team has made smaller, or one
// that is dead-lettered again).
package deadletter
