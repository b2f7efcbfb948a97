// Package dagengine runs DAGs: jobs (nodes) that start when all their
// parents have succeeded in the same DAG run. It is a thin shell of I/O
// around a pure core:
//
//   - dagengine/dag decodes and validates DAG definitions into graphs;
//   - dagengine/dagrun is the state machine of one DAG run: (state, input,
//     now) in, (new state, decisions) out, with no I/O and no clock;
//   - this package reads definitions and run events from Kafka, keeps each
//     DAG run's state in the store, and carries out the machine's
//     decisions: it enqueues node runs, publishes DagRunEvents, and wakes up
//     for node deadlines and schedules.
//
// # Topics
//
// Definitions travel on sundial.jobs like job definitions, keyed by the DAG
// id, with the record header "sundial-kind: dag" (the registry skips those
// records). The engine consumes sundial.jobs in its own group
// (DefaultDefinitionsGroup), validates each DagSpec (package dag), stores it
// (store.Dags) and answers on sundial.jobs.status with a JobStatus whose
// subject is dag_id: REJECTED with one FieldError per problem (a cycle is
// "nodes: cycle a -> b -> c -> a"), or CREATED, UPDATED, UNCHANGED, DELETED,
// STALE. A tombstone with the header deletes the DAG; a tombstone without it
// is the registry's to answer, and deletes a DAG of that id too.
//
// Like the registry, the engine also reads the team topics
// sundial.jobs.<team> (and reads sundial.jobs only with Config.SharedTopic),
// with the registry's ownership rules: on a team's topic a DagSpec must
// name that team as owner_team, and a DAG of another team is neither
// changed nor deleted (REJECTED, field owner_team, naming no other team; a
// tombstone without the header leaves it alone).
//
// The engine consumes sundial.events in its group (DefaultGroup) and reads
// the RunEvents that carry a dag_run_id. Those are a few in a thousand of
// the topic's records, so the others must cost next to nothing: every
// RunEvent writer puts the header "sundial-dag-run" on it (the dag_run_id,
// empty outside any DAG; topics.EncodeEvent), and the engine passes a
// record whose header is there and empty by without decoding it. A record
// without the header was written before it existed and is decoded as
// always, so an upgrade in any order loses no event. The engine reads up to
// Config.EventsMaxPoll records at once, since a poll's DAG runs are saved
// before the next poll. It publishes its own state changes on
// sundial.events too, as DagRunEvent records keyed by the DAG id with the
// header "sundial-kind: dag_run_event" (which it skips when reading).
// No new topic is needed.
//
// # DAG runs and node runs
//
// A DAG run starts when the DAG's schedule fires (every schedule kind of a
// job; see scheduler.go) or when it is triggered (Runs.StartRun, used by
// `sundial trigger` through the trigger consumer, for a Trigger naming
// the DAG). Its id is dag id + "@" + its due time in UTC unix
// milliseconds, so each occurrence has exactly one run however many
// instances or retries start it: the store creates it once.
//
// A node starts with a KindDAG due entry, made durable and handed to the
// dispatcher by the Enqueuer, due when the engine decided to start the node
// and carrying the Run to emit (Run.dag_run_id and dag_node_id set, origin
// RUN_ORIGIN_DAG). The node's run id is
//
//	<dag run id>/<node id>          first run of the node
//	<dag run id>/<node id>#<g>      its g-th run, after g-1 resumes
//
// and the entry's due time is the start decision's time, stored in the DAG
// run's state before the entry is written. So every attempt to start the
// same node generation (after a crash, by two instances) writes the same
// entry with the same run id; the store keeps one entry per key, and a
// Run that reaches the runners twice is refused by the runner's lease and
// dedupe mark on its run id (leasing: ErrRunHeld while the first executes,
// ErrAlreadyDone after it completed). A resume gives the rerun node a new
// generation, hence a new run id that no dedupe mark holds.
//
// # Which run states end a node
//
// The runners retry failed attempts themselves, so a node fails only when
// its run ends: SUCCEEDED (succeeded), DEAD (failed: no attempt left or a
// non-retryable error), SKIPPED (failed: e.g. the job was paused or
// deleted), CANCELLED (cancelled). FAILED and TIMED_OUT of an attempt are
// followed by RETRYING or DEAD and change nothing; STARTED and RETRYING
// update the node's attempt for display. A node with DagNode.timeout that
// has not ended by its deadline is TIMED_OUT ("stuck"), which counts as a
// failure; the DAG run is marked stuck at once. See package dagrun for the
// failure policies.
//
// # Durable state, conditional writes
//
// Each DAG run is one store record (store.DagRuns): the definition
// snapshotted at its start, the machine's encoded state (with the
// definition a resume adopted, if any), and a version.
// Every change is read, apply, then UpdateDagRun conditional on the version
// read (Cassandra: UPDATE ... IF version = ?). When two instances apply
// events to one run at once, one write applies and the other fails with
// store.ErrVersionConflict; the loser re-reads and applies its events again
// to the new state, where the machine ignores what was already applied. So
// no change is lost and no decision is taken twice: a node is started by
// exactly the one write that moved it from waiting to starting.
//
// Run events reach the engine keyed by job id, so the events of one DAG run
// are spread over partitions and instances; the conditional write is what
// makes that safe. Within one poll an instance applies all events of a run
// in one write, in the order it read them, and the runs of a poll at once,
// up to Config.Concurrency; the next poll waits for the poll's slowest run,
// since offsets are committed per poll.
//
// # Crashes lose nothing
//
// Decisions are saved before they are carried out (an outbox in the state,
// see dagrun): nodes in "starting" are runs not yet known to be enqueued,
// and the state's outbox holds the events not yet known to be published.
// After carrying them out the instance acknowledges them with another
// conditional write. Offsets of sundial.events are committed only after the
// poll's runs are saved and their work done. So an instance killed at any
// point leaves either uncommitted events (redelivered, and ignored where
// already applied) or saved work not yet acknowledged, which the next
// write to the run, or the sweep, carries out again. Carrying out twice
// costs a duplicate due entry write (same key) or a duplicate DagRunEvent
// (consumers treat (dag_run_id, node_id, state, run_id) as its identity),
// never a second node run.
//
// The sweep visits every unfinished run at start and every SweepInterval:
// it carries out left-over work, times out nodes whose deadline no living
// instance tracks, and sets this instance's timers. Between sweeps each
// instance keeps a timer heap of the deadlines of the runs it touched.
//
// # Limits and choices
//
//   - Every instance schedules every DAG; the run id makes the occurrence
//     one run, at the price of one conditional insert per instance per
//     occurrence. Definitions changed by another instance are seen at its
//     next refresh (SweepInterval); missed occurrences then follow the
//     DAG's misfire policy and catch-up window, by the jobs' own rule
//     (jobspec.CatchUp), one occurrence at a time.
//   - Due DAG runs of distinct DAGs start at once, up to
//     Config.Concurrency; one DAG's occurrences start one at a time and in
//     order, because its next occurrence follows the one last started and
//     a restart continues after its latest scheduled run in the store. A
//     failed start is tried again after a jittered wait that doubles from
//     RetryMin up to RetryMax, so DAGs resume soon after a store outage
//     and instances do not retry in step.
//   - A DAG run follows the definition it started with. Deleting or
//     changing a DAG starts no new run of the old definition and leaves
//     the runs under way alone. A resume (Runs.Resume) adopts the DAG's
//     current definition, so a DAG fixed and applied again after a failure
//     reruns its nodes with the fix: the run records the adopted
//     definition in its state (dagrun.State.Definition; the row keeps the
//     one it started with), and follows it from then on. It does so only
//     when the current definition is dag.Compatible with the run's (the
//     same nodes, jobs, dependencies and team; node order may differ);
//     otherwise, or when the DAG was deleted, the resume is refused
//     (ErrNotResumable), naming each node that differs, and changes
//     nothing. A node that runs a registered job reads that job afresh
//     when it starts, resumed or not.
//   - A node that times out (DagNode.timeout) is marked TIMED_OUT and its
//     DAG run stuck; the engine does not cancel the node's run. The
//     runners have no cancel of a run by id for other components: their
//     one cancel path (a Redis signal among runners, then a lease revoke)
//     belongs to the overlap policy REPLACE, and the engine holds no Redis
//     client. So the run goes on: the attempt under way ends at the job's
//     own timeout (JobSpec.timeout, 30s unless set; the runner cancels the
//     attempt there), failed attempts are still retried, and the run's
//     later events are ignored by the DAG run. To bound the work itself,
//     give the node's job a timeout and a retry policy that fit in the
//     node's timeout. A resume reruns the node under a new run id while
//     the old run may still be retrying; a concurrency limit of 1 with the
//     overlap policy QUEUE on the job (an inline job's id is the same for
//     every DAG run and generation) keeps the two from executing at once.
//   - DAG runs are triggered with Runs.StartRun, by a Trigger record on sundial.triggers keyed by the DAG id, which
//     the trigger consumer (in `sundial registry` and `sundial dev`) hands
//     to Runs.StartRun after its idempotency check; the run is due at the
//     trigger's requested_at, and its payload is not used.
//   - DAG-run records carry no TTL: they stay until deleted.
//   - Transition metrics are counted by the process whose write applied;
//     `sundial dag resume` counts its own in its own process.
//
// # Dependencies
//
// github.com/twmb/franz-go consumes and produces; internal/consume provides
// the group options, retries and the definitions loop shared with the
// registry; jobspec provides the rules a DAG shares with jobs (ids,
// schedules, misfires, inline jobs, status answers); schedule computes fire
// times; enqueue (through the
// Enqueuer interface) makes node runs due; prometheus/client_golang exports
// the metrics through an injected Registerer.
//
// # Lifecycle
//
// Start joins both consumer groups and starts five loops (run events, DAG
// definitions, schedules, deadlines, sweep); Stop (internal/lifecycle) ends
// them, returns once all five have exited, and then closes the clients. Stop
// is idempotent and safe before Start. A stopped Engine may be started
// again: what it tracks in memory (schedules, deadlines) is kept and brought
// up to date by the scheduler's refresh and the sweep, which both run at
// each start, as in a new process.
package dagengine
