// Package dagrun is the DAG engine's pure core: the state machine of one DAG
// run. It takes a state, an input and the current time, and returns the new
// state and the decisions the shell must carry out (start node X, publish
// this event, the DAG run finished). It does no I/O, reads no clock and
// starts no goroutine; the same inputs always give the same outputs, which
// is what the scenario tests under testdata/ rely on.
//
// # Inputs
//
//   - Start (the function): a new DAG run; every root node starts.
//   - RunEvent: a RunEvent of a node's run from sundial.events.
//   - Tick: time passed; nodes past their deadline time out.
//   - Resume: rerun the failed, cancelled and timed-out nodes and continue.
//   - Enqueued, StartFailed, Published: what became of the shell's work.
//
// # Node states
//
//	Waiting   -> Starting                  all parents succeeded (roots at once)
//	Starting  -> Running                   the node's run was enqueued (Enqueued, or a STARTED event)
//	Starting  -> Failed                    the node's job could not be found (StartFailed)
//	Starting/Running -> Succeeded          RunEvent SUCCEEDED
//	Starting/Running -> Failed             RunEvent DEAD or SKIPPED
//	Starting/Running -> Cancelled          RunEvent CANCELLED
//	Starting/Running -> TimedOut           Tick at or after the node's deadline
//	Waiting   -> Skipped                   a failure upstream, or the STOP policy
//	Failed/Cancelled/TimedOut -> Starting  Resume (a new generation, a new run id)
//	Skipped   -> Waiting                   Resume
//
// The terminal RunStates of a node's run are SUCCEEDED, DEAD, SKIPPED and
// CANCELLED: the runner retries FAILED and TIMED_OUT attempts itself
// (RETRYING follows them) and reports DEAD only when no attempt is left, so
// the engine sees a node as failed only then. STARTED and RETRYING update the
// node's attempt for display; ENQUEUED, FAILED, TIMED_OUT and DEFERRED change
// nothing.
//
// # Identity, duplicates and order
//
// A node's run id is NodeRunID(dag run id, node id, generation):
// "<dag run id>/<node id>" for the first run and "<dag run id>/<node id>#<g>"
// for the g-th, after g-1 resumes. An event counts only if its run id is
// the node's current one and the node is Starting or Running; anything else
// (a duplicate of an event already applied, an event of an earlier
// generation, a late event of a timed-out node) is ignored and changes
// nothing. Because terminal node states never change except by Resume,
// events may arrive in any order and any number of times: SUCCEEDED before
// STARTED is fine, and a second SUCCEEDED is a no-op.
//
// # Failure policy
//
// A node fails when its run ends DEAD, SKIPPED or CANCELLED, when its job
// cannot be found, or when it times out. Under STOP every waiting node is
// skipped at once (reason "upstream_failed" for the failed node's
// descendants, "dag_stopped" for the others); nodes already running finish.
// Under CONTINUE_INDEPENDENT only the failed node's waiting descendants are
// skipped ("upstream_failed"). The DAG run ends when no node is waiting,
// starting or running: SUCCEEDED when every node succeeded, otherwise
// TIMED_OUT when a node timed out, otherwise FAILED (reason "node_failed").
//
// # Stuck nodes
//
// A node with a timeout gets a deadline, its start time plus the timeout.
// A Tick at or after it marks the node TIMED_OUT (reason "node_timeout") and
// the DAG run stuck (State.Stuck), and publishes an event for the node at
// once; the DAG run's own TIMED_OUT event follows when its other nodes have
// ended. The engine cannot stop a runner's execution: a late event of the
// timed-out run is ignored.
//
// # The outbox
//
// Decisions are durable before they are carried out: the shell saves the
// new state first, then acts. So the state itself records the work not yet
// done: nodes in Starting are runs not yet known to be enqueued, and
// State.Outbox holds the events not yet known to be published. The shell
// carries them out (again, after a crash) and acknowledges them with
// Enqueued and Published. Both are idempotent, so carrying out the same
// work twice costs a duplicate enqueue (deduplicated by the run id) or a
// duplicate event, never a second node run.
package dagrun
