// Package worker turns a Go program into a Sundial executor: it registers
// handlers by name and joins a pool of runners, and the runner package does
// the rest. A team writes only the handler:
//
//	w, err := worker.New(worker.Config{KafkaBrokers: ..., RedisAddr: ..., CassandraHosts: ...})
//	w.Handle("billing.invoice", func(ctx context.Context, r *worker.Run) error {
//		r.Log.Info("invoicing", "customer", ...)
//		r.Progress(1, 3, "line billed")
//		return nil
//	})
//	err = w.Run(ctx)
//
// A Worker is a runner (package runner) with the team's handlers: the runs
// of jobs whose target is {"handler": {"name": "billing.invoice"}} execute
// the registered function; HTTP and Kafka targets execute as in the stock
// runner. Leases, heartbeats, fencing tokens, retries and deferrals, the
// per-downstream circuit breaker ("handler:<name>"), run events, the
// dead-letter topic and the metrics are the runner's, unchanged.
//
// Invariants:
//   - A handler is called at most once at a time per run by the pool
//     (the run's lease), but a run may execute more than once in all: a
//     worker that dies after the effect and before the run's record is
//     written leaves the run to be delivered again. Effects must be
//     idempotent by Run.ID; Run.FencingToken orders the holders of a job's
//     leases, so a downstream can refuse a write from a superseded holder.
//   - The handler's ctx ends at the job's timeout, when the lease is lost
//     or when the worker stops (after the runner's ShutdownTimeout); a
//     handler must return soon after. Once the lease is lost the attempt
//     fails with code "lease_lost" and is retried, whatever the handler
//     returns.
//   - Run.Log writes to the worker's logger and to the attempt's output:
//     the last lines (target.MaxOutputLines and target.MaxOutputBytes at
//     most, older lines dropped first) travel on the attempt's final event
//     (SUCCEEDED, FAILED, TIMED_OUT, DEAD, CANCELLED) and the history
//     writer stores them on the attempt's record, which `sundial runs get`
//     prints. Nothing is written to Kafka before the attempt ends, so
//     logging costs no round trip; a worker that dies mid-run loses that
//     attempt's lines.
//   - Run.Progress is a line of the run's log; progress is not published
//     while the run executes.
//   - A pool is, today, the runners' consumer group on the runs topics
//     (Group). Every consumer group on those topics receives every run, and
//     every member of a group may receive any run, so every member of a
//     pool must register the same handlers: a run whose handler a member
//     lacks is dead-lettered as "unknown_handler". Routing a job to a pool,
//     and strategies within a pool, come later.
//   - A worker announces itself on sundial.executors (package discovery)
//     with its pool, slots, blocking policy and load while it runs, and
//     writes its tombstone on Stop; PoolSlots and PoolBlocking apply the
//     pool's blocking policy on this worker (runner.PoolBlocking).
//   - Start opens its own connections (Kafka, Redis, Cassandra); Stop
//     closes them after the runner has stopped. Stop is idempotent and safe
//     before Start.
package worker
