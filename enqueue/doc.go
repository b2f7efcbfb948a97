// Package enqueue makes due entries durable and wakes the dispatcher that owns
// their shard. Everything that schedules a run for later (the registry's first
// occurrence of a job, the runner's retries, the trigger path, the DAG engine)
// goes through an Enqueuer.
//
// # The store is the truth; the wake-up is a hint
//
// Enqueue first writes the entries to the schedule store (store.PutDue) and
// only then produces one wake-up record per entry to sundial.shards, on the
// partition of the job's shard (store.ShardOf(job id, S)), keyed by the job
// id, with the entry itself (a sundialv1.DueEntry) as the value. It returns
// when the store write and every wake-up have been acknowledged (acks=all).
// WakeRecords builds the same wake-ups for entries the caller stored itself,
// for the caller to produce with its own client (partitioned by Partitioner)
// after the store write: the registry produces them with its answers and
// commits only once both are acknowledged.
//
// The store write alone is enough for an entry due later than the window a
// dispatcher has loaded: the dispatcher reads each minute bucket of its shards
// shortly before it falls due and finds the entry there. The wake-up exists
// for the entries a bucket read cannot find in time: an entry due inside a
// bucket the owner has already read (a retry in one second, a one-off due in
// two), or due in the past (behind the shard's watermark, which catch-up never
// reads again). The owner consumes its partition of sundial.shards, puts such
// entries straight into its timer heap, and fires them at their due time, or
// at once when they are overdue. Because the wake-up is produced only after
// the store write is acknowledged, a dispatcher that ignores a wake-up for a
// bucket it has not started reading yet is sure to find the entry when it
// does read it.
//
// A wake-up carries the whole entry, so the dispatcher can fire it from the
// record alone, even after the entry's bucket has been deleted behind the
// watermark. Dispatchers commit a wake-up's offset only after its entry has
// fired (or was found to lie beyond the loaded window), so a wake-up is never
// lost to a crash; the price is that a crash may fire it twice, with the same
// run id.
//
// # Errors and retries
//
// Enqueue is idempotent: an entry's identity is its key (due time, job id,
// kind, run id), so writing it again overwrites it with itself, and a second
// wake-up for an entry the dispatcher already holds is deduplicated. On any
// error the caller retries the whole call. An error after the store write
// (a failed wake-up) must be retried too: the entry is durable, but if it is
// due inside a window its owner has already loaded, only a wake-up makes it
// fire before the shard changes hands.
//
// Entries due more than WakeHorizon after now get no wake-up: no dispatcher
// has loaded their bucket yet, so the bucket read will find them. This keeps a
// registry that schedules a million future occurrences from flooding
// sundial.shards.
//
// # Partitioning
//
// A wake-up must land on the partition of its shard, whatever partitioner the
// client uses for other topics. The client given to New must therefore be
// created with the partitioner returned by Partitioner, which places records
// of sundial.shards on the partition enqueue chose (Record.Partition) and
// hands every other topic to the partitioner it wraps. New refuses a client
// without it, so a misconfigured client fails at start rather than waking
// the wrong dispatcher.
//
// # Metrics
//
// Through Config.Registerer (metrics.go): entries stored by kind, wake-ups
// by result (produced, skipped beyond the horizon, failed), and the time of
// each Enqueue or Wake call by outcome.
package enqueue
