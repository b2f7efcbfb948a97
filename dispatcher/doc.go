// Package dispatcher fires due entries at their due time: it turns the
// minute-bucketed schedule in the store into run records on
// sundial.runs.<priority>. Several dispatchers run side by side (`sundial
// dispatcher`), each owning a share of the shards.
//
// # Ownership
//
// Shards are shared out by Kafka, not by home-made membership: the
// dispatchers form the consumer group "sundial-dispatchers" over
// sundial.shards, which has one partition per shard, so owning partition p
// means owning shard p. The group uses the cooperative-sticky balancer rather
// than the range assignor: when a dispatcher joins or leaves, only the
// shards that move are stopped and re-claimed, while the others keep firing
// (an eager rebalance would pause every shard of the cluster and re-read its
// window). Contiguous ranges buy nothing here, since a shard's work does not
// depend on its neighbours.
//
// Each assigned partition gets one owner goroutine. Before dispatching, the
// owner claims the shard in the store (ClaimShard, a lightweight
// transaction that bumps the shard's fencing epoch), retrying when another
// claimant raced it. Every run it emits carries the shard and the epoch.
// The owner advances the shard's watermark with its epoch; once anyone has
// claimed the shard since, the store answers ErrStaleEpoch and the owner
// stops at once. Revoking a partition stops its owner and waits for it to
// drain: firings in progress finish (or are cancelled after DrainTimeout),
// the wake-up offsets are committed and the watermark advanced, so the next
// owner starts where this one stopped. A partition lost without revocation
// (the session expired), or a shard whose epoch went stale, is stopped at
// once: its firings are cancelled, and nothing is committed or advanced.
// A crashed dispatcher's shards are reassigned after the group's session
// timeout, or handed back at once to its restart under the same
// Config.GroupInstanceID (static membership); Stop leaves the group even
// then (consume.LeaveStatic).
//
// # Timing
//
// The timing logic of a shard is a pure core (core.go): events and the
// current time in, decisions out; the owner goroutine does the I/O. The core
// reads each minute bucket of its shard one bucket at a time, when now
// reaches the bucket's start minus the look-ahead (10s by default), keeps the
// entries in a heap ordered by due time, deduplicated by entry, and the owner
// keeps one timer, for the head of the heap: there is no poll loop. An entry
// fires when its due time comes, from memory. Its firing starts PrepareAhead
// (500ms) earlier, so that its job is in memory (or read) by then; the run
// is produced at the due time, never before.
//
// Entries that appear after their bucket was read (a retry in a second, a
// one-off due in two, an overdue entry written after an outage) are made
// known by wake-ups: package enqueue stores the entry, then produces it to
// the shard's partition of sundial.shards, which the owner consumes. A
// wake-up for an entry due inside the window already read (or being read),
// or in the past, goes into the heap and fires at its due time, or at once;
// a wake-up beyond the window is ignored, because the read of its bucket will
// find the stored entry. The window grows when a read starts, not when it
// ends, so an entry written while its bucket is being read is caught by the
// read or by its wake-up; no entry falls between the two (the bug of
// schedulers that only scan ahead).
//
// Memory holds the entries of the buckets read and not yet fired, and the
// definitions of their jobs: the look-ahead window, not the number of jobs.
// A bucket is read page by page. Whether the shard is behind or not, it
// takes no further page, and starts no further read, while it holds its
// share of MaxHeld (MaxHeld divided by the shards the dispatcher owns) of
// entries read or woken; the read resumes as firings free room, so a
// backlog waits in the store, in due order, rather than in memory. Chained
// successors do not count against the share (one per chain at a time;
// counting them would let a window of frequently recurring jobs starve the
// read of entries due before them). Nor does a read take a page beyond the
// look-ahead: a bucket's rows come in due order, so once what it took falls
// due later than now + Lookahead, the rest waits in the store until now
// reaches it. A shard that keeps up therefore holds about its rate times the
// look-ahead, not its whole minute bucket. Catching up (reading buckets
// already in the past) also reads the next bucket only while fewer than
// MaxBacklog entries of the shard are in memory.
//
// # Firing
//
// A scheduled entry fires only while it is live: its revision is the job's,
// and the job is neither deleted nor paused. A changed definition therefore
// takes effect from its next occurrence: the registry writes the new first
// occurrence, and the old definition's entry (or its successor that the
// dispatcher chained) is dead. The store writes the new entry before the job
// row, so an entry found with no row, or with an older one, is not dead yet:
// for a minute after its due time (jobRowWait) its firing is tried again,
// with backoff, until the row is there; dropped at once, a new job's chain
// would end before its first run. The run record snapshots the job (target,
// retry, payload, ...), has run id job id + "@" + due time in UTC unix
// milliseconds, and goes to sundial.runs.<priority>, keyed by job id, through
// an idempotent producer waiting for acks from all in-sync replicas. Retry and
// DAG entries carry their run (the runner's or the DAG engine's) and are
// re-emitted as they are, keeping run id and attempt; trigger entries are
// built from the job with the trigger's payload override.
//
// A paused job's entries that are not its own schedule (retries and
// deferrals, triggers, DAG nodes) are held, not dropped: the firing moves
// the entry to the job's held set (store.Held, one partition per job, not
// per shard) and counts as done, so the watermark passes it and neither a
// restart nor a shard move can lose it; the registry puts the held entries
// back, due at once in their held order and with their wake-ups, when it
// stores a definition that is not paused, and they fire late (hold.go). Keeping them in the schedule
// instead would pin the shard's watermark for as long as the pause lasts,
// stopping bucket deletion and lengthening every catch-up. After writing a
// held entry the firing reads the job from the store again, and takes the
// entry back and fires it if the job was resumed meanwhile: the registry
// writes the job before it reads the held set, so one of the two sees the
// entry. The scheduled entry of a paused job is dead (its revision is not the
// job's); the registry computes the resumed job's first occurrence from the
// moment of the pause, so what fell due meanwhile follows the misfire policy.
//
// The next occurrence of a recurring job is computed with package schedule
// and stored after the current run is acknowledged and before the current
// occurrence counts as done. A crash in between fires the current
// occurrence again (with the same run id, which runners deduplicate); it
// never loses the next one. Because a successor is stored only after its
// predecessor's run is out, a stored successor proves the predecessor was
// emitted: a new owner that finds several entries of one job's chain (its
// predecessor fired some after its last watermark advance) fires only the
// latest. A late entry stands for every occurrence up to the moment it
// fires, and later entries of its chain due by then are dropped, so a
// catch-up fires no occurrence twice.
//
// A run record Kafka refuses for good (too large for the producer's or the
// broker's record limit, an invalid record, a runs topic that is invalid or
// that the dispatcher may not write: classifyProduce in refused.go, one
// table-tested rule) is never tried again, since retrying it would hold its
// entry, and with it the shard's watermark, for ever. The dispatcher
// dead-letters the run instead (on sundial.dlq, with a RunError its team
// reads: "dispatch: run record is N bytes, over the limit ...", a run too
// large kept without its payload and target) and emits its terminal DEAD
// event; once both are acknowledged the firing counts as done (a recurring
// job's chain goes on). Every other produce error fails the firing, which
// is tried again with the same run id.
//
// Firings run concurrently, up to MaxInflight per shard and MaxFiring per
// dispatcher (each owned shard has an equal share), each waiting for
// its own acknowledgement for as long as its context lives (a firing whose
// context ends first counts as failed, never as done, and fires again with
// the same run id; the record, if it was sent, is failed by Close); the client coalesces the records of concurrent
// firings into one produce request per broker, so a herd is not produced a
// record at a time, and the watermark still passes only firings whose runs
// were acknowledged and whose successors are stored.
//
// # Job definitions
//
// A firing needs its job's definition, and reading it then would cost a
// store read per run, all at once when many runs fall due together. So a
// scheduled entry carries a snapshot of its job at the entry's revision
// (store.JobSnapshot: the spec, the schedule's anchor, and CheckedAt, a time
// at which the revision was known to be current). The registry's first
// entry carries it (checked at the definition's UpdatedAt), and a firing
// writes it into the successor it chains (checked at the time up to which
// the jobs feed had applied every change when the firing was planned, or at
// the read of the job). A firing reads nothing when the jobs feed vouches for
// the snapshot (snapshots.go): the feed is fresh up to JobFeedMaxLag ago, it
// has recorded every change seen since CheckedAt (its change log starts at
// the start of its replay: it first reads the answers stamped in the
// JobFeedReplay, 2h, before the dispatcher started; plus a clock skew of 5s;
// and moves forward when it forgets old changes to stay bounded), and none
// of them is newer than the entry's revision. So a restarted dispatcher
// fires the chains of jobs of intervals up to about 2h without reads. A changed, paused or deleted job is thus found by the
// revision check as before, after a read. The store write of the successor
// is then the firing's only store call; writes of concurrent firings, of
// all the dispatcher's shards, share PutDue calls (nextwriter.go: what
// arrives within 50ms of the first, or while all 4 writers are out, goes in
// one call; no run waits for it, since the run is produced first), which
// store/cassandra writes as one unlogged batch per partition, or as
// batches spanning partitions when every node replicates every partition.
// Likewise the runs and ENQUEUED events of firings due within 5ms of each
// other share a produce request (the producer's linger).
//
// Otherwise (an entry without a snapshot, a trigger, a dispatcher just
// started, a changed job), the firing takes its job from memory: a bucket's
// read also reads the jobs of its entries that will not use a snapshot (at
// most 256 reads in flight per dispatcher; the bucket counts as read once
// they are; a firing whose job is still queued reads it itself). A firing is
// prepared PrepareAhead ahead of its firing time, and at its firing time
// checks that the job in memory, or the snapshot, is still the one it used
// (else it is planned again).
//
// Definitions in memory are kept current by the jobs feed: each dispatcher
// follows sundial.jobs.status, which the registry writes after it has
// stored a change, and forgets a job on every answer for it (and records
// the answer's revision in the change log), so the next firing reads the
// job again. The feed is fresh up to t0 when it has read the topic to the
// end offsets it listed at t0. Definitions in memory are used only while the
// feed is fresh up to JobFeedMaxLag ago, and for at most two minutes after
// their read; otherwise, or when an entry's job is not in memory (a
// wake-up), the firing reads its job from the store PrepareAhead before its
// firing time. Either way, a change the registry answered more than
// JobFeedMaxLag before a firing is seen by it; one answered later may miss
// that one occurrence. A change stored by a registry that died before
// answering is seen when the record is processed again (the answer is then
// UNCHANGED, which the change log counts as a change), or, for a definition
// in memory, two minutes after the read at the latest.
//
// Dispatch latency (Kafka's acknowledgement minus the due time) is recorded
// in sundial_dispatcher_dispatch_latency_seconds.
//
// # Watermark and offsets
//
// A shard's watermark is the due time up to which every entry has been
// dispatched and its successor stored. The owner advances it every
// WatermarkInterval to min(now, what the reads have taken, the earliest
// entry in memory, waiting or being fired) - 1ms, never backwards. What the
// reads have taken ends at the latest due time the pages of the bucket
// being read have brought (its rows come in due order; a row written after
// its page was read has a wake-up), or at the end of the buckets read
// completely between reads. So the watermark trails now by about
// WatermarkInterval, and a new owner after a crash fires again (with the
// same run ids, which runners refuse) what fell due since the last advance,
// not everything since the minute began; the price is one lightweight
// transaction per owned shard every WatermarkInterval, whether it fires or
// not (docs/architecture.md measures what they cost Cassandra).
// Buckets wholly behind the watermark are deleted (one partition tombstone
// each, DeleteBucket): they are never read again, and a tombstone per
// partition costs later reads nothing, unlike a TTL per entry that leaves a
// tombstone per row. An entry written behind the watermark after the delete
// is fired from its wake-up, which carries the whole entry.
//
// The offset of a wake-up is committed only once its entry has fired or was
// found beyond the loaded window, so a wake-up for an entry behind the
// watermark (whose only trace it is) survives a crash; it may then fire
// twice, with the same run id. A partition without a committed offset (a new
// consumer group) is read from the wake-ups of the last CatchUpHorizon,
// including any appended while the start is looked up (package
// internal/startoffsets; kgo's own reset by time can skip those).
//
// # Catch-up and misfires
//
// A new owner reads every bucket from the shard's watermark to now (at most
// CatchUpHorizon back; a never-advanced shard starts at the cluster's
// creation). An entry first seen more than MisfireThreshold after its due
// time is late. A late scheduled entry stands for every occurrence of its
// job from its due time to now, and the job's misfire policy decides which
// of those inside its catch-up window fire (with origin CATCH_UP):
// FIRE_ONCE the latest one, FIRE_ALL each of them in order, SKIP none. The
// chain then continues at the first occurrence after now. The rule itself is
// jobspec.CatchUp, shared with the registry and the DAG engine; the
// dispatcher decides only which entries are late. Late retry, trigger and
// DAG entries always fire.
//
// # Lifecycle
//
// Start and Stop follow internal/lifecycle. Start starts the jobs feed, then
// joins the group; Stop ends the poll loop, leaves the group (each owned
// shard drained, committed and its watermark advanced, as on a revocation),
// waits for every owner and stops the jobs feed last, since owners read the
// job cache it keeps current. Stop is idempotent, safe before Start, and
// returns when all of them have exited. A stopped Dispatcher may be started
// again; it claims the shards the group gives it under a new epoch.
//
// # Files
//
//   - dispatcher.go: the Dispatcher: the consumer group over sundial.shards,
//     start offsets of a new group, one owner per assigned partition, and
//     the producer of runs.
//   - owner.go: the owner of one shard: claim, bucket reads, watermark
//     advances and the writer of next occurrences.
//   - tenure.go: one claim of a shard: the owner's event loop around the
//     core and the drain on release.
//   - core.go: the shard's timing logic (shardCore), pure: Poll(now)
//     returns what to read and fire; scenarios under testdata/core.
//   - fire.go: one firing: plan the runs from the job, produce them, store
//     the next occurrence.
//   - refused.go: which produce errors dead-letter a run instead of
//     retrying it.
//   - hold.go: the held entries of paused jobs.
//   - prefetch.go: job definitions read ahead of their firings (jobCache).
//   - snapshots.go: when a firing may use the snapshot its entry carries
//     (the change log of the jobs feed).
//   - jobfeed.go: the jobs feed that keeps those definitions current.
//   - nextwriter.go: the group commit of the firings' next occurrences.
//   - firers.go: the goroutines firings run on, kept between firings.
//   - offsets.go: which wake-up offsets may be committed.
//   - config.go, metrics.go: the Config and the Prometheus metrics.
//
// # Dependencies
//
// franz-go (Kafka client: consumer group with cooperative rebalancing,
// manual offset marks, idempotent producer), prometheus/client_golang
// (metrics on an injected Registerer), and, in tests only,
// cockroachdb/datadriven (the core's scenario files under testdata/core) and
// HdrHistogram (latency percentiles).
package dispatcher
