// Package runner consumes runs from sundial.runs.<priority>, executes each
// one at most once in effect, and publishes every state change to
// sundial.events. Several runners share the work through one Kafka consumer
// group.
//
// # From record to worker
//
// One goroutine polls the group and puts every record into one FIFO queue
// per priority; Config.Concurrency workers take records from the queues by
// weighted selection with aging (package runner/priority: 6:3:1 by default,
// a record's weight rising with its wait), so low priority runs get a share
// under any flood of high priority ones. Within a priority, each owning
// team's runs wait in a lane of their own and the lanes take turns, so one
// team's herd does not stand in front of another team's runs (fair sharing;
// docs/production.md, "Quotas").
//
// Memory is bounded: a priority's topic is paused (PauseFetchTopics) when its
// queue holds Config.QueueCapacity records, a team counting at most
// Config.TeamQueueCapacity of them, and resumed at half, at most
// Concurrency runs execute, and at most Config.MaxInFlight hold a lease
// (executing, or succeeded and being made durable: a worker takes an
// in-flight slot before it takes a record, and the slot comes back when the
// record finishes). What one poll returns may overshoot a queue by at
// most one poll (Config.QueueCapacity records).
//
// # The pool's slots and blocking policy
//
// At most Config.PoolSlots runs execute at once (pool.go). Under fifo and
// concurrent a worker takes a pool slot before it takes a record, so runs
// that find every slot busy wait in the queues, and the next slot goes to
// the oldest record (fifo, whatever its priority) or to the weighted pick
// (concurrent). Under discard a worker takes a record first and a slot if
// one is free; a record that finds none takes its lease and gives it back
// at once (a run already done is dropped as a duplicate, and the job's
// overlap policy applies), then is SKIPPED ("pool_busy") and finished,
// never retried. The runner
// announces itself, its slots and its runs executing on sundial.executors
// (package discovery) while it runs, and writes its tombstone on Stop
// before it drains.
//
// # Routing
//
// A run whose job names a routing strategy (route.go, package routing) is
// not executed by the runner that fetched it from sundial.runs.<priority>:
// one of a few router goroutines, which take no pool slot, chooses a live
// member of the run's pool from the Directory and produces the run to
// that member's directed topic sundial.runs.direct.<id>, and the fetched
// record finishes only when that produce is acknowledged (a finishing
// goroutine waits for it; the router, or the worker that handed a handler
// run over, moves on at once). A run chosen for
// this runner goes straight to its queue. The runner consumes its own
// directed topic in the same group (it alone subscribes to it), and
// adopts the directed topics of the members of its pool that left the
// live set, routing what it finds there again. A run that finds no
// executor is deferred by Config.RouteDelay (DEFERRED, no attempt spent).
// Routing never decides whether a run executes: the lease and the dedupe
// mark of the run id do, so a run delivered twice by a crash or an
// adoption still takes effect once.
//
// A run of a job without routing whose target is not a handler (HTTP,
// Kafka, exec) executes on the runner that fetched it only when the run's
// pool (jobspec.PoolOf) is Config.Pool; any other runner hands it over,
// in admit (routePool, planPool: rendezvous hashing of the job id over the
// pool's live members, so one job's runs stay on one member), to the
// directed topic of a live member of the pool, or, when the pool has none,
// defers it by Config.RouteDelay (DEFERRED, reason no_executor, the pool
// named in the event's error message, no attempt spent). A run of the
// runner's own pool reads no Directory and takes no extra step.
//
// A handler run this runner cannot execute (its name is not in
// Config.Handlers or the run's pool is not Config.Pool, and Config.Remote
// has no live worker of the run's team and pool serving it) is never
// dead-lettered for it (remote.go, placeHandler): it is handed over to the
// directed topic of a live executor that announces (job's pool, owner team,
// handler) on sundial.executors (a runner's own handlers serve every team
// of its pool; a worker gateway announces those of its connected workers,
// per team and pool), and when none does it is deferred by
// Config.RouteDelay (DEFERRED, reason no_worker, the pool named in the
// event's error message, no attempt spent;
// sundial_runner_no_worker_deferrals_total).
// A runner with Config.Remote executes a handler run on a remote worker as
// it would a local handler: the lease, fencing token, events, dedupe mark
// and commits are its own (package gateway). With Config.DirectOnly it
// consumes only its directed topic (and the adopted ones of its pool).
//
// A BROADCAST or SHARDED run is fanned out instead (fanout.go): the router
// produces its child runs, whose ids derive from the base run id, to their
// members' directed topics and finishes the base record once all are
// acknowledged. A child that succeeds adds its index to a Redis set of
// the base run before its dedupe mark; the child that completes the set
// also emits the base run's SUCCEEDED, and a child that ends dead, skipped
// or cancelled emits that state for the base run too (docs/architecture.md,
// "Broadcast and sharded runs").
//
// # Commits: the contiguous watermark
//
// Offsets are committed per partition only up to the lowest record that has
// not finished (package runner/commit), every Config.CommitInterval, on
// revocation and on Stop. A run finishes when its outcome is durable: its
// events acknowledged, and its retry or deferral written as a due entry. So a
// crashed runner's unfinished runs, and everything after them in their
// partitions, are delivered again to the next owner (at-least-once; the
// dedupe mark makes the effect once). A record whose outcome could not be
// made durable while the runner keeps its partition (the lease stopped
// being trusted before the run started, an event was not acknowledged) is
// tried again after a backoff, by its worker or, when its events were not
// acknowledged, back in its queue: nobody else would deliver it
// before the next rebalance, and its partition's watermark would stay
// pinned until then.
//
// A long run holds back exactly one thing: the committed offset of its own
// partition, which cannot pass it. The records after it in that partition
// are still fetched, executed and finished; other partitions commit freely.
// If the runner crashes meanwhile, the finished records behind the long run
// are delivered again and refused by their dedupe marks. To keep memory
// bounded, a partition whose tracked offsets reach
// Config.MaxPendingPerPartition is paused until the long run ends.
//
// # One execution
//
//  1. The circuit breaker of the run's team and downstream (package
//     runner/breaker; one team's failures never open another team's) is
//     open: the run is deferred by the breaker's open timeout (a KindRetry
//     due entry with the same attempt, a DEFERRED event), spending no
//     attempt.
//  2. When the run's team has a max_concurrent_runs (Config.TeamQuotas),
//     take one of the team's slots (leasing team slots), renewed with the
//     runner's other team slots every lease TTL/3 and given back when the
//     attempt ends. A full team defers the run by Config.TeamQuotaDelay
//     (DEFERRED, reason team_quota, no attempt spent), as QUEUE does below.
//     When the team has a max_runs_per_minute, the run is then counted among
//     the team's runs of the current minute (leasing.StartTeamRun, one
//     atomic script; every child of a BROADCAST or SHARDED run counts, the
//     base run does not); a run over it gives its team slot back and is
//     deferred to the next minute (DEFERRED, reason team_rate, no attempt
//     spent), spread by up to one TeamQuotaDelay.
//     Then acquire the lease (package leasing). A dedupe mark means the run
//     already took effect: it is skipped and committed. A run leased by
//     another holder (a redelivery while the first delivery still executes)
//     waits and asks again, so it neither runs twice nor gets lost if the
//     first holder dies. When the job's concurrency slots are full, the
//     overlap policy decides: FORBID records SKIPPED; QUEUE defers the run by
//     the job's queue delay (a DEFERRED event and a KindRetry due entry with
//     the same run id and attempt; the dispatcher fires it again then);
//     REPLACE signals the oldest holder to stop (a Redis marker key and a
//     pub/sub message that cancels the execution at once; after
//     Config.ReplaceGrace the lease is revoked through leasing as well) and
//     takes the slot when it frees; ALLOW runs without a limit. An
//     operator's cancel (SignalCancel, cancel.go) uses the same channel
//     with its own marker key, and the operator revokes the lease too; the
//     attempt then ends CANCELLED with reason "cancelled" and no retry. A
//     marker is read until Redis answers: an unanswered read is never taken
//     for "not cancelled" (which would retry the run); a runner that stops
//     first leaves the record to be delivered again. Every later delivery
//     of a cancelled run (that one, or one after a runner died between
//     CANCELLED and its commit) finds the cancel marker when it takes the
//     lease (the acquire script reads it, leasing.Request.Flags) and ends
//     CANCELLED without executing: a run an operator cancelled never
//     executes again. The same holds for a replaced run's marker, which the
//     script reports even when the job's slots are full: a replaced run
//     delivered again ends CANCELLED (reason "replaced") rather than
//     executing or replacing the run that replaced it.
//  3. A Keeper renews the lease, through the runner's leasing.Batcher (its
//     renewals share pipelines with other runs'); losing it cancels the
//     execution's context.
//     The attempt runs under the job's timeout. The fencing token goes
//     downstream with the run id (HTTP Sundial-Fencing-Token and
//     Idempotency-Key; Kafka record headers).
//     STARTED is held back for Config.StartedDelay (1s, events.go
//     emitStarted): an attempt that ends within it produces only its
//     outcome, which carries the start (started_time, duration), so a
//     short run costs one record fewer; a longer one has STARTED produced
//     when the delay passes, with the time it started, and always before
//     any later event of the delivery (one lock orders them). A delivery
//     that ends unfinished produces a STARTED still held as it ends. A
//     runner that dies within the delay leaves no STARTED of that
//     execution, as it left none of an execution whose STARTED was still
//     in its producer's buffer.
//  4. Success: SUCCEEDED is acknowledged first, then the dedupe mark is set
//     (leasing Complete), then the offset may be committed. A crash in
//     between executes the run again, which the downstream absorbs by the
//     idempotency key; the other order could lose the event. The worker
//     does not wait for any of it: it produces SUCCEEDED and takes its next
//     run, while a finishing goroutine waits for the acknowledgements, has
//     the Keeper renew the lease meanwhile, completes the lease and only
//     then marks the offset finished. If the event is not acknowledged, the
//     lease is released and the record goes back to its queue after a
//     backoff (as in "Commits" above). A success never waits for run
//     history, which package history builds from the events later.
//  5. Failure: FAILED (or TIMED_OUT), then, when the retry policy allows
//     (exponential backoff with full jitter, Retry-After as a minimum,
//     non-retryable codes), a KindRetry due entry for attempt+1 through the
//     Enqueuer and RETRYING; otherwise a DeadLetter to sundial.dlq and DEAD.
//     The lease is released either way, without a dedupe mark, so a replay
//     from the dead-letter topic runs with the same run id. As for a
//     success, a finishing goroutine, not the worker, waits for the events'
//     acknowledgements before the record is finished; so do skips,
//     deferrals and cancellations.
//  6. Stop cancels executions still running after Config.ShutdownTimeout;
//     they release their leases, record no event and are not committed.
//
// # Why a run waited
//
// Every event of a delivery carries the run's timeline (waits.go, package
// lateness): dispatched_time (the record's dispatched_at), received_time
// (when the poll fetched it), leased_time and started_time, each set once
// reached, and wait_reason, judged once when the lease is taken: of the
// gaps longer than Config.WaitBound, the longest names the wait. The
// rule, in lateness.ReceiptWait and its neighbours:
//
//   - due → dispatched: "catch_up" for a run of origin CATCH_UP, fired
//     late by the misfire policy; "dispatch_delay" for any other (the
//     dispatcher's own delay: a trigger, retry or DAG node fired late while
//     its shard had no owner, or a dispatcher that was behind);
//   - dispatched → received: "no_executor" when the runner's Directory
//     knew no executor live at the dispatch time, "backlog" when it knew
//     one. An executor counts as live at t when it had started by t (its
//     announced start) and, if it has left (tombstone) or expired since,
//     its last heartbeat is not before t; so a run dispatched in the last
//     heartbeat interval of a runner that then stopped is called
//     "no_executor" though that runner may still have been polling. A
//     Directory not read up to date (a runner just started) is waited for
//     up to 10 s, and past that taken to have known one: "no_executor" is
//     never said without knowing;
//   - received → leased: "pool_full" (the record waited in the queues for
//     a worker or a pool slot).
//
// A DEFERRED event (and a SKIPPED pool_busy) names its own wait instead,
// lateness.OfDeferral of its reason: team_quota, team_rate, overlap,
// breaker_open, no_executor.
//
// # The steps of a delivery
//
// execution.handle lists the steps of one delivery, each a small type or
// function that returns how the delivery ended when it ends it (a result:
// unfinished, finished, or handedOff to a finishing goroutine) rather than
// setting a flag for its caller to read:
//
//  1. admit (admit.go): routing, the pool's busy slots under discard,
//     the downstream's breaker, and the team's quotas (teamGate,
//     teamquota.go) let the run through or defer or skip it, planAdmit
//     deciding the order in which they are asked;
//  2. takeLease (execute.go, lease.go): the job's lease is acquired under
//     the overlap policy, decideAcquire saying what follows each answer of
//     Redis, and a Keeper renews it (heldLease);
//  3. beforeAttempt: a run cancelled, replaced or suspended before this
//     delivery is settled without executing;
//  4. attempt (attempt.go): the target executes once (execute), and how it
//     ended is judged (judge: classify, and the markers in Redis);
//  5. settlement (settle.go): the verdict is carried out (conclude,
//     succeeded, failed, dead, deferRun, cancelled, skip, suspend) and made
//     durable.
//
// runEvents (events.go) produces the delivery's events in order and tells
// when they are acknowledged. The decisions are pure functions,
// table-tested: planAdmit (admit.go); in verdict.go classify, leaseAfter, decideAcquire,
// beforeAttempt, decideReplace, budgetAttempt; where a run that asks for
// an executor goes, planRoute and planPool (route.go) and placeHandler
// (remote.go).
// The worker finishes the record, tries it again, or leaves it to the
// finishing goroutine (finish.go), as the result says. Whatever a step is handed it owns: conclude and suspend stop
// the lease's Keeper on every path, or, for a success, hand it to the
// finishing goroutine, which renews the lease until the dedupe mark; what
// happens to the lease after a verdict is decided by leaseAfter before the
// run is settled.
//
// # Checkpoints and suspension
//
// With Config.Checkpoints, each attempt's context carries a
// checkpoint.Session (package worker's Checkpoint and LastCheckpoint): the
// handler's saves are stored in Cassandra fenced by the attempt's fencing
// token, so an attempt that lost its lease cannot overwrite the checkpoint
// of the one that took the run over. An operator's suspend (SignalSuspend,
// suspend.go) sets a marker key; the marker is asked after each stored
// checkpoint, and once it exists the save answers checkpoint.ErrSuspended
// and the attempt's context is cancelled with that cause. When the handler
// has returned an error, the runner stores the suspension (the run as
// delivered) before anything else, releases the lease without a dedupe
// mark, emits SUSPENDED (not terminal, no attempt spent) and commits the
// record. A handler that returns nil after ErrSuspended has finished: the
// run succeeds. A delivery that finds the marker when it takes the lease
// (its runner died between the checkpoint and SUSPENDED; the acquire script
// reads the marker, leasing.Request.Flags) suspends the run at once without
// executing it. Resume deletes the marker and enqueues the
// stored run as a KindRetry due entry with the same run id and attempt;
// the execution it starts reads the checkpoint the run stopped at. A run
// is suspended only at a checkpoint: a handler that saves none runs to its
// end.
//
// The lease calls of all workers (acquire, renew, complete, release) go
// through one leasing.Batcher: calls that arrive while its pipelines (4)
// are out share the next one, so a busy runner pays one Redis round trip
// for many runs.
//
// # What waits for an acknowledgement, and why
//
// Events are produced without waiting (the producer batches them, 2ms
// linger); no worker waits for an event's acknowledgement. The waits that
// remain are each needed by an invariant:
//
//   - a finishing goroutine waits for every event of a run before marking
//     its offset finished: the commit watermark passes a run only once its
//     terminal event is durable;
//   - for a success it waits before the dedupe mark: a mark without its
//     SUCCEEDED would lose the event for good, since the run is never
//     executed again;
//   - the retry or deferral due entry is written (a store write) before
//     RETRYING or DEFERRED is produced, so the event never announces an
//     attempt that is not stored;
//   - the dead letter is acknowledged (ProduceSync) before DEAD, so a run is
//     declared dead only once it can be replayed.
//
// The events of one execution carry strictly increasing times at
// microsecond precision, so that history, which keeps an attempt's newest
// state by event time, never ties a fast failure with its start.
//
// # Lifecycle
//
// Start and Stop follow internal/lifecycle. Stop ends the poll loop first,
// then the workers (waiting up to ShutdownTimeout for executions and for the
// goroutines finishing successes), then the commit and cancel-signal loops,
// commits what finished and closes the clients; it returns when all of them
// have exited, is idempotent and safe before Start. A stopped Runner may be
// started again: queues, partitions, pauses and slots start empty, since
// what an earlier run fetched belongs to a group membership that ended and
// is redelivered.
//
// # Production settings
//
// The default Concurrency (256) suits HTTP targets, which mostly wait; the
// default HTTP transport keeps Concurrency idle connections per downstream
// host, so workers reuse connections instead of dialling for every call. The
// group session (Config.SessionTimeout, 6s, heartbeats every second) moves
// a dead runner's partitions within about six seconds; Config.InstanceID
// makes the runner a static member, so a restart after a crash under the
// same id keeps its partitions without rebalancing the others, while a
// Stop still leaves the group (consume.LeaveStatic).
//
// Trigger latency (lease acquired − the attempt's due time) is a histogram
// metric and, in the events, started_time − attempt_due_time (STARTED, or
// the outcome that carries the start of a short attempt).
//
// # Metrics and logs
//
// Metrics go to Config.Registerer, labelled only by bounded values
// (priority, outcome, lease result, downstream host). Every log line about a
// run carries job_id and run_id.
//
// # Files
//
//   - runner.go: the Runner: start and stop, the poll loop and the workers.
//     It composes owned types, each with a file: backlog, committer,
//     finisher, router, markers, cancelBoard, poolGate and teamSlots.
//   - backlog.go: backlog, the records fetched and not finished: each
//     partition's offsets, the priority queues, and their pauses.
//   - commits.go: committer, the commits and the rebalance listener.
//   - execute.go: the life of one delivery (execution.handle) and the
//     lease it takes (takeLease).
//   - admit.go: what stands before the lease: planAdmit, the order of the
//     checks, and admit, which carries its plan out.
//   - lease.go: the lease acquire under the overlap policy, replacing a
//     holder, release.
//   - attempt.go: one attempt under the lease and its judgement.
//   - settle.go: the settlement of a delivery: events, retries, deferrals,
//     dead letters, suspensions.
//   - finish.go: finisher, the finishing goroutines of the records whose
//     events or hand-over wait for Kafka's acknowledgement, and the return
//     of a record not made durable to its queue (retryLater).
//   - events.go: runEvents, the events of a delivery.
//   - waits.go: the timeline on every event and the wait judged at the lease
//     (package lateness).
//   - verdict.go: the pure decisions: classify (how an attempt ended
//     decides whether the run succeeded, is deferred, retried, dead,
//     cancelled or unfinished), leaseAfter (what the verdict does with the
//     lease), decideAcquire (what follows an answer to a lease acquire: the
//     run taken, a duplicate, the overlap policy, a wait or a retry),
//     beforeAttempt (what a delivery holding the lease does first),
//     decideReplace (signal or revoke a holder under REPLACE) and
//     budgetAttempt.
//   - replace.go: the overlap policy REPLACE: signals and markers, and
//     cancelBoard, which cancels local executions named on the cancel
//     channel.
//   - suspend.go: the suspend marker and Resume (an attempt's checkpoint
//     session is made in attempt.go, a suspension settled in settle.go).
//   - pool.go: the pool's slots and blocking policy, and the announcer.
//   - route.go: router, which owns routing: the Directory and Picker, the
//     router goroutines and their queue, the directed topic, the hand-over,
//     the placement of unrouted runs in their job's pool (routePool,
//     planPool), and the adoption of departed members' topics (forget.go:
//     deleting them once drained).
//   - fanout.go: BROADCAST and SHARDED fan-out (router.fanout) and the
//     plans and tallies it keeps in Redis (markers).
//   - remote.go: handler runs: Remote (a worker gateway's workers), the
//     handlers announced, and their placement (placeHandler): the run
//     executed here, handed over, or deferred as no_worker (router).
//   - cancel.go: the operator's cancel, and markers, which reads the
//     runs' markers in Redis.
//   - teamquota.go: team slots (max_concurrent_runs), their renewal, and
//     the team of a fetched record.
//   - config.go, metrics.go: the Config and the Prometheus metrics.
//   - Subpackages: breaker (circuit breakers), commit (contiguous offsets),
//     deadletter (replays from sundial.dlq), priority (weighted queues),
//     retry (the retry policy), target (HTTP, Kafka, handler and exec
//     targets).
//
// # Extension points
//
// Config.Handlers are the in-process handlers by name; package worker builds
// an in-process worker on them, and Config.Remote a worker gateway's
// remote ones (package gateway; docs/workers.md). A handler that implements
// target.AttemptHandler is given the fencing token and the attempt's
// target.Output. Config.Exec runs the commands an operator allows by name
// (sundial runner --exec-allow), for the teams and pools Config.Egress
// allows each to.
//
// # Egress
//
// Whatever a run does is done for its owner team and checked against
// Config.Egress (package runner/egress) before anything leaves the runner:
// an HTTP target dials only addresses the team may reach, checked after name
// resolution and on every redirect, through a transport of the team's own (a
// connection is never shared between teams); a Kafka target writes only the
// team's own topics (<team>.*) and those allowed to it, never Kafka's
// internal topics or Sundial's; an exec target runs only a command allowed to
// the team or the runner's pool. A refusal is a failure that is not retried
// (target.CodeEgressRefused, or target.CodeExecNotAllowed for a command). What an attempt writes to its Output (a
// worker's run log, a command's output), bounded by target.MaxOutputLines
// and target.MaxOutputBytes, travels on the attempt's final event
// (RunEvent.log), and the history writer stores it on the attempt's record.
// While the attempt runs, each line it logs also goes to its live tail
// (package logtail): the runner's one Shipper goroutine writes them to Redis
// once per Config.LogTail.Every, within its bounds, off the attempt's path.
// A Remote's attempt (a team's worker, through the worker gateway) logs
// far away: the gateway hands its lines to the attempt's Output as the
// worker sends them (target.Output.Live), so they take the same path.
// Nothing is produced while the attempt executes.
//
// # Dependencies
//
// github.com/twmb/franz-go (consumer group, pausing, producing),
// github.com/redis/go-redis/v9 (the replace signal), github.com/sony/gobreaker/v2
// (breakers), github.com/prometheus/client_golang (metrics). Tests use
// franz-go's kfake and miniredis for fast runs, the local stack through
// internal/testenv for the real ones, and github.com/HdrHistogram/hdrhistogram-go
// for latency percentiles.
package runner
