// Package store defines Sundial's durable state: job definitions, the
// minute-bucketed schedule of due entries, the cluster's shard count, the
// per-shard fencing epoch and watermark, and run history. Two
// implementations exist, store/cassandra (the real one) and store/memory (the
// embedded mode); store/storetest is the conformance suite both must pass, so
// callers may rely on every statement below whichever one they hold.
//
// # Shards and buckets
//
// The shard count S is fixed when the cluster is initialised (InitCluster)
// and never changes: changing it would move every job to another shard.
// The shard of a job is ShardOf(jobID, S), the FNV-1a 32-bit hash of the id
// modulo S. The store computes it itself from the stored S, so an entry can
// never be written to a partition its readers do not look at.
//
// A bucket is one UTC minute: BucketOf(due) truncates a due time to its
// minute. A due entry lives in the partition (bucket, shard); a dispatcher
// that owns a shard reads that shard's buckets shortly before they fall due.
// Reading a bucket returns every entry of that partition in clustering order
// (due time, job id, kind, run id), paged, so a bucket of any size can be read
// without holding it all in one response.
//
// Times are stored with millisecond precision, the precision of run ids;
// the store truncates and converts to UTC on the way in.
//
// # Batches and partitions
//
// PutDue groups entries by partition and writes each group as unlogged
// batches. A batch confined to one partition is applied atomically and in
// one round trip by the replicas that own it; a batch spanning partitions
// makes one coordinator wait on many replicas, the classic way to overload
// a Cassandra cluster. store/cassandra therefore lets a batch span
// partitions only when every node replicates every partition of the
// keyspace (one node, or no more nodes per data centre than its
// replication factor): the coordinator then writes every partition of the
// batch locally, and the cluster answers one request for many writes. Either
// way a partition's group is never split across batches unless it is too
// big for one. PutDue as a whole is not atomic across partitions: on error,
// some groups may be written. Every write is idempotent (the primary key is
// the entry's identity), so the caller retries the whole call.
//
// # Job definitions and the liveness of scheduled entries
//
// A job row holds the serialized JobSpec, a content hash, the revision that
// wrote it (the registry uses the record's offset in sundial.jobs, which
// orders the definitions of one job) and the next due time that definition
// scheduled. UpsertJob is a no-op when the spec's hash equals the stored one,
// and ignores (OutcomeStale) a revision not newer than the stored one, so
// replaying the jobs topic from any offset changes nothing. A delete leaves a
// tombstone carrying its revision, so an older definition replayed after the
// delete cannot resurrect the job.
//
// No write of a job row is a transaction. Every job row is written whole
// with a write timestamp that grows with its revision (store/cassandra:
// 2^60 + revision), so whatever order writes of one job arrive in, the row
// ends at the highest revision written: a replayed or reordered older
// definition, even one racing a newer one, never overwrites it. UpsertJob and
// DeleteJob read the row first only to decide the outcome and which entry to
// delete. store/memory applies the same rule under its lock. UpsertJobs
// applies many definitions in one call with the outcomes and state UpsertJob
// one by one would leave; store/cassandra writes their first occurrences in
// one batch per partition, then their rows in batches of many jobs.
//
// A changed definition writes the due entry of its first occurrence, then the
// job row, then deletes the entry the previous definition had written. Every
// scheduled entry carries the revision of the definition that produced it,
// and a scheduled entry is live only while the job exists, is not deleted,
// and its revision equals the entry's. The dispatcher checks that before
// firing, so an entry of an old definition (one the dispatcher already
// chained forward, or one whose delete failed) is dead rather than a second
// firing. The dispatcher chains a recurring job by writing the next
// occurrence with the same revision; it never rewrites the job row, so firing
// costs no lightweight transaction.
//
// # Fencing epochs
//
// Shard ownership is decided outside the store (a Kafka consumer group); the
// store makes it safe. ClaimShard(shard, owner, seen) succeeds only if the
// shard's epoch is still seen, and sets it to seen+1: of any number of
// claimants that read the same epoch, exactly one wins and the others get
// ErrEpochConflict (they may re-read with GetShard and try again). A claim
// fences the previous owner: AdvanceWatermark carries the epoch its caller
// claimed and fails with ErrStaleEpoch once anyone has claimed since. A
// dispatcher that sees ErrStaleEpoch stops dispatching the shard.
//
// # Watermarks
//
// A shard's watermark is the due time up to which every entry has been
// dispatched. It only moves forward: advancing to a time not after the
// current watermark changes nothing. The new owner of a shard catches up from
// it. Claims keep the watermark.
//
// # Run history
//
// Run history keeps one record per (run, attempt), overwritten as the
// attempt changes state; a record written with an older UpdatedAt never
// replaces a newer one, so replayed events cannot move a run backwards.
// UpdatedAt orders writes at microsecond precision, since the states of a
// fast attempt often share a millisecond. RecordRuns writes many records at
// once, with the same rule per record.
// Records expire after the store's retention. ListRuns returns a job's
// records newest due time first; JobSummary is computed from the retained
// records. A planned attempt is a record in state scheduled (the same row its
// later states overwrite); whoever writes a later occurrence or retry may
// write one, so that JobSummary.NextDue is the most recently planned
// attempt. The first occurrence a definition schedules is not written as a
// record: ListRuns and JobSummary derive it from the job row
// (PlannedRecord, WithPlanned), so registering a job writes nothing to the
// history. It lists as a scheduled attempt 1 as of the definition's
// UpdatedAt until a record of that attempt is written (the history of its
// firing), and, like a record, not after the retention has passed since
// UpdatedAt; a changed definition lists its own plan only, and a deleted
// or paused one none.
//
// The run index (RunIndex) files every record that names its OwnerTeam
// under that team and the hour of its due time (RunBucket), with the same
// newest-wins rule and retention, so ListTeamRuns lists a team's records of
// every job in a window of due times, in ListRuns order, paged after a
// RunKey. A record's empty WaitReason and zero Dispatched, Received and
// Leased leave the stored ones in place (the last wait an attempt reported
// stays). The Cassandra store writes the index rows after the runs rows of
// the same call: a crash in between leaves a record unlisted by team until
// its attempt's next event, never listed without its runs row.
//
// # DAG definitions and DAG runs
//
// DAG definitions (Dags) are kept like job definitions: hash, revision and
// tombstone, decided by DecideDagUpsert and DecideDagDelete. A DAG run
// (DagRuns) is one record holding the DAG engine's opaque state and the
// definition it follows (snapshotted at creation). It is created once
// (CreateDagRun: of racing creators exactly one creates it) and changed only
// conditionally on the version its writer read (UpdateDagRun fails with
// ErrVersionConflict otherwise), so two engines applying events to one run
// never lose each other's changes. ListActiveDagRuns lists every unfinished
// run; a run that just ended may still be listed for a while.
package store
