// Package gateway is the worker gateway: it lets a team's worker execute
// the team's handler runs with one address (the API's) and the team's
// token, holding no Kafka, Redis or Cassandra credential.
//
// The gateway is a runner (package runner, built by assemble.Gateway and
// hosted by `sundial api --worker-gateway` and `sundial dev`) whose
// handler executor is remote: its Broker (runner.Config.Remote) puts each
// attempt of a handler run in an in-memory queue keyed by (owner team,
// job's pool, handler), and the WorkerService
// (proto/sundial/api/v1/worker.proto) hands it to a polling worker of that
// team and pool (PollRequest.pool, default "default") that registered that
// handler.
// The runner keeps everything else: the lease and its renewals in Redis,
// the fencing token, the events, the dedupe mark, retries, deferrals and
// the commits, as for a handler compiled into it.
//
// Invariants:
//   - A call acts for the team of its token only (auth.Principal.Team, role
//     operator or above; a token of no team is refused): Poll returns only
//     that team's attempts, and Heartbeat, Complete and the outcomes a
//     Poll carries (PollRequest.completions) accept only a task token of
//     that team (a carried outcome the team cannot give is dropped). Another team's task token is answered NotFound,
//     exactly as an unknown one, so the answer reveals nothing.
//   - A task token is random (144 bits), names one attempt, and is valid
//     from the Poll that hands it out until its outcome is taken or the
//     attempt ends.
//   - An attempt is handed to one worker at most. A worker that sends no
//     heartbeat for Config.LostAfter heartbeat intervals is lost: the
//     attempt fails with code worker_lost, retryable, so the job's retry
//     policy redoes it on another worker of the team (Run.Replay is set on
//     every attempt after the first). A task nobody took fails so too once
//     no live worker of the team serves its handler.
//   - When the attempt's context ends (timeout, lease lost, cancel,
//     replace, the gateway stopping) the worker learns it at its next
//     heartbeat (stop, with the reason) and its late outcome is answered
//     stale and ignored: the runner has already settled the attempt.
//   - The Broker holds no durable state. A gateway that dies loses the
//     attempts it held: their leases expire and the runs are delivered
//     again (its directed topic is adopted by another gateway of the pool
//     GatewayPool), as for any runner that dies.
//   - A worker is live, and its (team, handler, pool) triples are
//     announced on sundial.executors by the gateway's runner, while it
//     polls or within LostAfter intervals of its last poll or heartbeat.
//     The stock runners route a team's handler run to a gateway that
//     announces the triple of the run's job, and defer it as no_worker
//     when none does. The workers of one pool may serve different
//     handlers; a worker never receives a run of another pool's job.
//   - AppendLog hands a running attempt's lines to its live tail (the
//     attempt's target.Output, Live: to its logtail.Tail only) for the
//     worker the task was given to (the caller's team, the PollRequest's
//     worker_id), and only until the attempt ends; any other entry is
//     refused, as an unknown token is. The tail bounds the lines with
//     Config.LogTail, the bounds of the gateway's runner (assemble.Gateway
//     sets them) and the ones every Poll answer tells the workers, however
//     much a worker sends; each line is cut as the attempt's log cuts it.
//     An outcome that says its lines were sent live (live_log) gives the
//     tail only the rest, and keeps the final log for history.
//   - Its metrics (metrics.go, on Config.Registerer) are labelled by team
//     at most: never by worker, job, run or token.
package gateway
