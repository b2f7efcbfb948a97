// Package operator carries out the actions an operator takes on jobs and
// runs: pause and resume a job, cancel a running run, trigger a job now
// (and wait for its result), backfill a time range, and preview what
// applying definitions would change. Each action is one method of Operator,
// (ctx, ids, options) → result, error, called by the CLI and by the API
// server alike.
//
// # Invariants
//
//   - Kafka stays the one write path of definitions and triggers: Pause and
//     Resume produce the definition in force with its paused flag changed
//     (through the client, as `sundial jobs apply` does) and wait for the
//     registry's answer; Trigger produces a Trigger record. What a paused
//     job holds, and what it fires when resumed, is the registry's and the
//     dispatcher's rule (see package dispatcher), not this package's.
//   - Cancel decides nothing on its own: it asks Redis whether the run holds
//     a live lease (leasing.Store.Holding) and, if it does, sends the
//     runners' cancel signal (runner.SignalCancel). The runner that executes
//     the run ends it with a CANCELLED event and schedules no retry. A run
//     that holds no lease is answered ErrNotRunning and nothing is sent.
//   - Backfill enqueues each occurrence as a trigger entry whose run id is
//     the occurrence's own (job id + "@" + due ms), so a repeated backfill,
//     or a backfill over occurrences that already ran, creates no second
//     run: runners execute a run id once (its dedupe mark), and Backfill
//     skips occurrences whose mark exists. At most MaxConcurrent of its runs
//     are pending (enqueued and not finished, as sundial.events tells) at
//     once.
//   - PlanApply reads and computes; it produces and writes nothing.
//   - Every action that changes something names one place where it is
//     audited: Config.Audit, when set, receives one Action per call, after
//     the change was made. AuditTrail writes it to package audit's trail
//     with the caller (the auth.Principal in ctx) as actor.
//   - One diff rule: PlanApply's field changes are audit.Diff's, so a plan
//     and the trail's record of the apply name fields and values alike.
//
// # Waiting
//
// Trigger with Wait, Cancel with Wait and Backfill follow sundial.events
// from a little before the action (the follower starts before anything is
// produced, so no event is missed) and return on the run's terminal state:
// SUCCEEDED, DEAD, CANCELLED or SKIPPED. Each partition starts where
// package startoffsets says, which also reads an event appended while the
// follower looks its start up (kgo's AfterMilli offset would skip it). They
// wait until ctx ends; the caller bounds them.
package operator
