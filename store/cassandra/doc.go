// Package cassandra is the Apache Cassandra implementation of store.Store,
// the store of record. It passes the conformance suite of store/storetest,
// like store/memory; see package store for the data model and invariants.
//
// Driver: github.com/gocql/gocql v1. It prepares every statement with bind
// markers once per host and caches it (MaxPreparedStmts), routes each
// statement to a replica of its partition (TokenAwareHostPolicy over
// round-robin, or DC-aware round-robin when Config.Datacenter is set), and
// pages large reads.
//
// Tables (migration 1): cluster_config, jobs, due_entries, shards, runs, and
// schema_migrations, which records the versions applied; migration 3 adds
// dags, dag_runs and their indexes dag_runs_by_dag and dag_runs_active
// (see dags.go); migration 5 adds teams and tokens, the API's callers
// (see teams.go); migration 6 adds held_entries, the entries a paused job
// holds (see held.go); migration 7 adds the audit trail (see audit.go);
// migration 8 adds team quotas and the per-team job index (see quotas.go).
// Migrate creates the
// keyspace (SimpleStrategy, or NetworkTopologyStrategy with a data centre)
// and applies each missing migration once; every statement is CREATE ... IF
// NOT EXISTS, so an interrupted migration is re-run safely. Open only checks
// that the schema is current.
//
// Consistency:
//   - Reads and writes use Config.Consistency, LOCAL_QUORUM by default: a
//     read after a write overlaps it in at least one replica, and one replica
//     per partition may be down. On the single local node (RF 1) this is the
//     one replica.
//   - The rows that decide ownership and identity (shards, cluster_config,
//     dags, dag_runs) are written only by lightweight transactions at
//     Config.SerialConsistency (LOCAL_SERIAL), never by plain writes, since
//     mixing the two on a row can lose updates. Their reads before a
//     decision (GetShard, re-reads after a lost transaction) are serial
//     reads, which see every completed transaction.
//   - Job rows are only ever written by plain, whole-row writes USING
//     TIMESTAMP 2^60 + revision (jobs.go), so the highest revision wins
//     whatever the order of arrival, and never by a transaction. GetJob is
//     a plain read: the dispatcher calls it per entry, and a slightly stale
//     row only means a just-changed definition takes effect from its next
//     entry.
//   - A lightweight transaction that times out may or may not have applied;
//     the store reads the row back serially to decide, and never reports a
//     retryable error for a claim that may have succeeded.
//   - Due entries and run history are plain, idempotent writes that the
//     driver may retry.
//   - An acknowledged write is taken as durable: the dispatcher lets a
//     shard's watermark pass an occurrence once its successor is stored.
//     A node must therefore not acknowledge what its crash can lose: with
//     RF 1, commitlog_sync batch or group (the local stack's is batch);
//     with RF 3 and LOCAL_QUORUM, two replicas hold every acknowledged
//     write. commitlog_sync periodic, Cassandra's default, on a single node
//     loses the writes of the last moments before a SIGKILL
//     (TestAcknowledgedWritesSurviveKill, make test-crash).
//
// Writes to the schedule and to run history are unlogged batches of at most
// Config.BatchSize statements. A batch is confined to one partition (bucket,
// shard, or a job's history), and applied atomically by its replicas
// without the batch log, unless every node replicates every partition of
// the keyspace (read when the store opens, batching.go): then the groups of
// several partitions share a batch of at most maxCrossBatchBytes (4 KiB,
// under batch_size_warn_threshold's default of 5 KiB, so the node logs
// nothing), one request instead of one per partition. A partition's group
// is never split across batches unless it is too big for one. Run history
// rows carry a TTL of Config.RunRetention and the event's time as their
// write timestamp.
//
// Job rows: when every node replicates every partition, UpsertJobs writes
// the rows of many jobs in one unlogged batch (jobs.go, rowBatches, at most
// maxRowBatchBytes as the node counts them, below batch_size_fail_threshold;
// a larger row goes alone); otherwise each row is its own write. Each row is
// a whole, idempotent write at its own write timestamp, so the batch decides
// nothing the writes one by one would not, and its only promise is fewer
// requests: the node spends more CPU on a request than on writing a small
// row, and CPU per definition bounds bulk registration on a small node
// (BenchmarkUpsertJobs). Such a batch exceeds batch_size_warn_threshold
// (5 KiB by default), which makes the node log a warning per batch unless
// the threshold is raised (deploy/local raises it to 32 KiB);
// batches under it cost the node about 30% more CPU per definition.
// The audit records (PutAudits) and team index rows (TrackTeamJobs) of a
// registration go the same way through writeByPartition: batches by
// partition, spanning partitions up to maxRowBatchBytes when every node
// replicates every partition; TrackTeamJobs writes the index rows before
// the job_teams rows, so a call cut short is completed by its repeat.
// No history record is written with a row: the attempt a definition plans
// is read from its row (store.PlannedRecord), which halves the node's CPU
// per registered definition.
//
// Connecting is bounded: dialling each host is limited by
// Config.ConnectTimeout and the whole attempt by the caller's context, and
// an unreachable cluster yields an error wrapping ErrUnreachable that names
// the hosts.
package cassandra
