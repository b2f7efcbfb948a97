package store

import (
	"context"
	"iter"
	"time"
)

// Jobs is the registry's view of the store: job definitions keyed by id.
type Jobs interface {
	// UpsertJob stores a definition and schedules its next occurrence
	// (job.NextDue; zero schedules nothing). A spec identical to the stored
	// one is OutcomeUnchanged and writes nothing; a revision not newer than
	// the stored one (or the tombstone's) is OutcomeStale and writes nothing.
	// A changed definition replaces the entry the previous one scheduled.
	UpsertJob(ctx context.Context, job Job) (Outcome, error)
	// DeleteJob leaves a tombstone with the given revision and deletes the
	// entry the last definition scheduled. OutcomeUnchanged when already
	// deleted, OutcomeStale when the revision is not newer than the stored one.
	DeleteJob(ctx context.Context, id string, revision int64, at time.Time) (Outcome, error)
	// GetJob returns the stored job, tombstones included (Deleted set), or
	// ErrNotFound.
	GetJob(ctx context.Context, id string) (Job, error)
	// GetJobs is GetJob for many ids in one call: the stored jobs,
	// tombstones included, keyed by id. An id the store has no job for is
	// absent from the map, and an id may appear more than once.
	GetJobs(ctx context.Context, ids []string) (map[string]Job, error)
	// UpsertJobs is UpsertJob for many jobs in one call, each result as if
	// the jobs were upserted one after the other in order (a job id may
	// appear more than once). A job the store refuses gets its error
	// (errors.Is ErrInvalid) in its result and the others go on. The error
	// is a transient failure of the call: some jobs may be written, every
	// write is idempotent, and the caller retries the whole call.
	UpsertJobs(ctx context.Context, jobs []Job) ([]UpsertResult, error)
}

// JobLister pages through the job definitions, for the control-plane API.
type JobLister interface {
	// ListJobs returns up to limit definitions that are not deleted, in
	// the store's listing order, starting after the job whose id is after
	// ("" for the first page). JobPage.Next is the after of the next page,
	// empty once the listing has ended. A page may hold fewer than limit
	// jobs, even none, without being the last: tombstones take their place.
	// Every job that exists for the whole listing is returned exactly once.
	ListJobs(ctx context.Context, after string, limit int) (JobPage, error)
}

// JobPage is one page of ListJobs.
type JobPage struct {
	Jobs []Job
	// Next is the cursor of the next page; empty on the last one.
	Next string
}

// UpsertResult is what UpsertJobs did with one job.
type UpsertResult struct {
	Outcome Outcome
	// Err is set when the store refused the job (errors.Is ErrInvalid).
	Err error
}

// Schedule is the schedule of due entries, read by dispatchers and written by
// the registry (first occurrences), the dispatcher (next occurrences), the
// runner (retries), the trigger API and the DAG engine.
type Schedule interface {
	// PutDue writes entries, each into the partition (BucketOf(Due),
	// ShardOf(JobID, S)), batched per partition. Idempotent; not atomic
	// across partitions.
	PutDue(ctx context.Context, entries ...DueEntry) error
	// ListBucket yields every entry of one partition in clustering order
	// (Due, JobID, Kind, RunID), reading it page by page. A non-nil error is
	// yielded once, last.
	ListBucket(ctx context.Context, bucket time.Time, shard int) iter.Seq2[DueEntry, error]
	// DeleteDue deletes entries by key; deleting a missing entry is not an
	// error.
	DeleteDue(ctx context.Context, keys ...DueKey) error
	// DeleteBucket deletes a whole partition with one partition tombstone,
	// which is far cheaper for later reads than a tombstone per entry. Meant
	// for buckets behind the shard's watermark.
	DeleteBucket(ctx context.Context, bucket time.Time, shard int) error
}

// Held keeps the entries of paused jobs out of the schedule, one partition
// per job. A firing that finds its job paused moves the entry here (package
// dispatcher), so the shard's watermark passes it and no bucket read meets it
// again; the registry moves a job's held entries back into the schedule when
// it stores a definition that is not paused.
type Held interface {
	// HoldDue stores entries in their jobs' held sets. Idempotent.
	HoldDue(ctx context.Context, entries ...DueEntry) error
	// ListHeld returns the held entries of a job in (Due, Kind, RunID)
	// order.
	ListHeld(ctx context.Context, jobID string) ([]DueEntry, error)
	// DeleteHeld deletes held entries by key; deleting a missing entry is
	// not an error.
	DeleteHeld(ctx context.Context, keys ...DueKey) error
}

// Cluster holds the settings fixed when the cluster is initialised.
type Cluster interface {
	// InitCluster stores the shard count once. Calling it again with the
	// same count returns the stored config; with another count it fails
	// with a *ShardCountError (errors.Is ErrShardCountMismatch).
	InitCluster(ctx context.Context, shards int) (ClusterConfig, error)
	// GetClusterConfig returns the stored config or ErrNotInitialized.
	GetClusterConfig(ctx context.Context) (ClusterConfig, error)
}

// Shards holds each shard's fencing epoch, owner and watermark.
type Shards interface {
	// ClaimShard makes owner the shard's owner if its epoch is still seen
	// (0 for a shard never claimed) and returns the new epoch, seen+1.
	// Otherwise it fails with ErrEpochConflict.
	ClaimShard(ctx context.Context, shard int, owner string, seen int64) (int64, error)
	// AdvanceWatermark moves the shard's watermark forward to t if the
	// shard's epoch is still epoch, else fails with ErrStaleEpoch. A t not
	// after the current watermark changes nothing.
	AdvanceWatermark(ctx context.Context, shard int, epoch int64, t time.Time) error
	// GetShard returns the shard's state; a shard never claimed has epoch 0.
	GetShard(ctx context.Context, shard int) (ShardState, error)
}

// History is the run history, written from run events.
type History interface {
	// RecordRun stores the state of one attempt. A record whose UpdatedAt
	// is older than the stored one for the same attempt is ignored;
	// UpdatedAt is compared at microsecond precision (it is returned at
	// millisecond precision).
	RecordRun(ctx context.Context, rec RunRecord) error
	// RecordRuns is RecordRun for many records, written together where the
	// store can (the records of one job share a partition). It validates
	// every record before writing any; on error, some records may be stored.
	RecordRuns(ctx context.Context, recs []RunRecord) error
	// ListRuns returns up to limit records of a job, newest due time first
	// (then run id ascending, attempt descending).
	ListRuns(ctx context.Context, jobID string, limit int) ([]RunRecord, error)
	// JobSummary summarises the retained history of a job.
	JobSummary(ctx context.Context, jobID string) (Summary, error)
}

// RunIndex lists the run records of a team by due time, across jobs: every
// record History stores with an OwnerTeam is indexed under that team and
// the hour of its due time (RunBucket), with the same newest-wins rule and
// retention.
type RunIndex interface {
	// ListTeamRuns returns up to q.Limit records of q.Team due in
	// [q.From, q.To) that q.Keep accepts, in CompareRuns order, starting
	// after q.After when it is set.
	ListTeamRuns(ctx context.Context, q TeamRunsQuery) ([]RunRecord, error)
}

// Triggers remembers the idempotency keys of triggers, so that a trigger
// sent twice runs once.
type Triggers interface {
	// TriggerDedupe records that the trigger of jobID with key runs at due,
	// unless that job already has a trigger with that key; either way it
	// returns the due time recorded first (due itself when this call
	// recorded it, or when an earlier call recorded the same due). The
	// record expires after ttl. Concurrent calls with one job and key agree
	// on one due time.
	TriggerDedupe(ctx context.Context, jobID, key string, due time.Time, ttl time.Duration) (time.Time, error)
}

// Dags holds DAG definitions, with the semantics of Jobs: outcomes,
// revisions and tombstones follow DecideDagUpsert and DecideDagDelete.
type Dags interface {
	// PutDag stores a definition. An identical spec is OutcomeUnchanged, a
	// revision not newer than the stored one OutcomeStale; neither writes.
	PutDag(ctx context.Context, dag Dag) (Outcome, error)
	// DeleteDag leaves a tombstone with the given revision.
	DeleteDag(ctx context.Context, id string, revision int64, at time.Time) (Outcome, error)
	// GetDag returns the stored DAG, tombstones included, or ErrNotFound.
	GetDag(ctx context.Context, id string) (Dag, error)
	// ListDags returns every DAG that is not deleted, by id.
	ListDags(ctx context.Context) ([]Dag, error)
}

// DagRuns holds the state of DAG runs. Every change of a run is
// conditional on the version its caller read, so two engines applying
// events to the same run never overwrite each other: one wins, the other
// gets ErrVersionConflict, re-reads and applies its event again.
type DagRuns interface {
	// CreateDagRun stores a new run at version 1 unless a run with its id
	// exists. It returns the stored run (the existing one if there was
	// one) and whether this call created it.
	CreateDagRun(ctx context.Context, run DagRun) (DagRun, bool, error)
	// UpdateDagRun writes run's State, Status, Summary, Active and
	// UpdatedAt if the stored version is still run.Version, and returns the
	// new version (run.Version+1). Otherwise it fails with
	// ErrVersionConflict, or ErrNotFound when there is no such run. run is
	// the run as read with those fields changed; its other fields feed the
	// listings.
	UpdateDagRun(ctx context.Context, run DagRun) (int64, error)
	// GetDagRun returns a run or ErrNotFound.
	GetDagRun(ctx context.Context, id string) (DagRun, error)
	// ListDagRuns returns up to limit runs of a DAG, newest due time first,
	// without their Spec and State.
	ListDagRuns(ctx context.Context, dagID string, limit int) ([]DagRun, error)
	// ListActiveDagRuns returns the ids of every active run, in no
	// particular order. A run that ended moments ago may still be listed;
	// a run that is active always is.
	ListActiveDagRuns(ctx context.Context) ([]string, error)
}

// Store is the whole seam, implemented by store/cassandra and store/memory
// and checked by store/storetest. Components should depend on the smaller
// interface they use.
type Store interface {
	Jobs
	JobLister
	Schedule
	Held
	Cluster
	Shards
	History
	RunIndex
	Triggers
	Dags
	DagRuns
	// Close releases the store's connections.
	Close() error
}
