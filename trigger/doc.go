// Package trigger turns requests to run a job now (Trigger records on
// sundial.triggers) into due entries of kind trigger, through the same
// enqueue path as every other run: the entry is stored and the dispatcher that
// owns the job's shard is woken, so the run starts within milliseconds.
//
// # Identity and idempotency
//
// A trigger's due time is its requested_at at millisecond precision, or the
// timestamp of its record when requested_at is unset (never the reading
// process's clock), so the run id job_id + "@" + due time is the same every
// time the record is read. The idempotency key goes further: the first
// trigger of a job with a given key records its due time in the store
// (store.Triggers.TriggerDedupe, a conditional insert) and every later
// trigger with that key, whatever its requested_at, finds the first due time
// and starts nothing. A redelivery of the first trigger itself finds its own
// due time and enqueues the same entry again, which is harmless: the entry
// and its run id are the same, and runners execute a run id once. Keys are
// remembered for Config.Retention (default: the retention of
// sundial.triggers); a trigger older than that is refused as "expired",
// because a key that has been forgotten can no longer protect it.
//
// # DAGs
//
// Jobs and DAGs share one id namespace. With Config.Dags set, a trigger
// whose key names no job but a DAG starts that DAG's run due at the
// trigger's due time (run id dag_id + "@" + due ms), after the same
// idempotency check: a duplicate key starts nothing, a redelivery starts the
// same run again, which the store creates once. A DAG run has no payload:
// the trigger's payload is not used. A paused DAG is refused as "paused", a
// deleted or unknown id as "job_deleted".
//
// # Refusals
//
// A trigger that cannot run is answered with a RunEvent on sundial.events in
// state SKIPPED for the run it would have started (run id, job id, due time),
// with the reason:
//
//   - "job_deleted": the job does not exist or was deleted;
//   - "paused": the job is paused;
//   - "invalid_trigger": the record is undecodable or a field is bad, as
//     jobspec.DecodeTrigger reads it, the same check the Go client makes
//     before producing (the event's error message names the field:
//     "idempotency_key: required");
//   - "expired": the trigger is older than the retention.
//
// These answers go to sundial.events rather than sundial.jobs.status: the
// status topic is compacted by job id and holds the answer to the job's
// definition, which a refused trigger must not overwrite. A duplicate trigger
// (a key already seen) is not refused: its run exists under the first
// trigger's run id, and nothing is published for it.
//
// # Invariants
//
// Processing is at least once and in order per job (internal/consume):
// offsets are committed only after the entry is enqueued (stored and its
// dispatcher woken) or the refusal is acknowledged by Kafka. Store and Kafka
// errors are retried with backoff, never turned into refusals, except errors
// the store marks store.ErrInvalid, which no retry can fix (refused as
// "invalid_trigger"); a bad record never stops consumption.
//
// # Lifecycle
//
// Start joins the consumer group and Stop leaves it (internal/lifecycle):
// Stop is idempotent, safe before Start, and returns once the processing
// goroutine has exited and the Kafka client is closed. A stopped Consumer may
// be started again; it then resumes from the group's committed offsets.
package trigger
