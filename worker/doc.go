// Package worker turns a Go program into a Sundial executor: it registers
// handlers by name and executes the runs of jobs whose target is
// {"handler": {"name": ...}}. A team writes only the handler:
//
//	cfg, err := worker.Load(os.Args[1:]) // --api-url, SUNDIAL_API_TOKEN, --config, ...
//	w, err := worker.New(cfg)
//	w.Handle("billing.invoice", func(ctx context.Context, r *worker.Run) error {
//		r.Log.Info("invoicing", "customer", ...)
//		r.Progress(1, 3, "line billed")
//		return nil
//	})
//	err = w.Run(ctx)
//
// A worker runs in one of two modes.
//
// A team's worker (Config.APIURL and Config.Token) talks to the worker
// gateway of the control-plane API only (package gateway): it polls for
// its team's runs of the handlers it registered, heartbeats each attempt,
// and gives the outcome and the attempt's log lines back. It holds no
// Kafka, Redis or Cassandra credential; the gateway's runner holds the
// lease, the fencing token, the events and the commits for it. Several
// teams' workers, and several versions of one team's worker, run side by
// side on one installation.
//
// An in-process worker (Config.Kafka, RedisAddr, CassandraHosts) is
// a runner (package runner) with the team's handlers, in a pool's consumer
// group: HTTP and Kafka targets execute as in the stock runner, and it
// holds the installation's credentials. It is for the operators' own
// handlers.
//
// Invariants:
//   - A handler is called at most once at a time per run by the pool
//     (the run's lease), but a run may execute more than once in all: a
//     worker that dies after the effect and before the outcome is recorded
//     leaves the run to be delivered again, with Run.Replay set. Effects
//     must be idempotent by Run.ID; Run.FencingToken orders the holders of
//     a job's leases, so a downstream can refuse a write from a superseded
//     holder.
//   - A team's worker receives only runs whose owner team is its token's
//     team, whose job's pool is Config.Pool (default DefaultPool) and whose
//     handler it registered; it cannot heartbeat, complete or see another
//     team's attempt. The workers of one pool may register different
//     handlers.
//   - The handler's ctx ends at the job's timeout, when the lease is lost,
//     when the run is cancelled or replaced (a team's worker learns it at
//     its next heartbeat), or when the worker stops (after the runner's
//     ShutdownTimeout); a handler must return soon after. Once the lease
//     is lost the attempt fails with code "lease_lost" and is retried,
//     whatever the handler returns. A team's worker that cannot heartbeat
//     for three heartbeat intervals stops its handlers: the gateway has by
//     then failed the attempt as "worker_lost" and retries it elsewhere.
//   - Run.Log writes to the worker's logger and to the attempt's output:
//     the last lines (target.MaxOutputLines and target.MaxOutputBytes at
//     most, older lines dropped first) travel on the attempt's final event
//     (SUCCEEDED, FAILED, TIMED_OUT, DEAD, CANCELLED) and the history
//     writer stores them on the attempt's record, which `sundial runs get`
//     prints. A team's worker sends them with the outcome. A worker that
//     dies mid-run loses that attempt's lines.
//   - A team's worker also sends each running attempt's new lines to the
//     gateway for the run's live tail (livelog.go: WorkerService.AppendLog,
//     about once a second, one call for all its attempts), once a Poll
//     answer says the gateway takes them. Each attempt's lines are
//     bounded before they are sent, by logtail's rule with the bounds the
//     gateway told (a handler logging 100 MB sends at most the attempt's
//     bound, and counts the rest); logging never waits on the call. A
//     failed call loses those lines for the tail only. An outcome says
//     whether its attempt's lines were sent live (CompleteRequest.live_log,
//     with the lines not sent yet), so that the tail gets each line once.
//   - Run.Progress is a line of the run's log; progress is not published
//     while the run executes.
//   - Checkpoint saves through the attempt's runner (a team's worker:
//     through the gateway, on a heartbeat) and returns ErrSuspended when
//     the run is to be suspended.
//   - A run whose handler no live executor serves for its team in its
//     job's pool waits: runners defer it (DEFERRED, reason "no_worker", the
//     pool named in the event's error message) and never dead-letter it
//     for a missing handler. An in-process worker announces its handlers
//     for every team of its pool; a gateway announces those of its
//     connected workers, per team and pool.
//   - A team's worker is configured as the CLI is (settings.go, through
//     internal/configfile): the same keys (api-url, api-token,
//     api-tls-ca-file, pool, ...) from flags, SUNDIAL_* variables or the
//     YAML file, a flag winning over its variable, the variable over the
//     file (its section "worker" over its top level), the file over the
//     default. Every bad setting is reported, none ignored.
//   - Start opens the worker's connections (the API's, or Kafka, Redis and
//     Cassandra); Stop closes them after the handlers have returned. Stop
//     is idempotent and safe before Start.
package worker
