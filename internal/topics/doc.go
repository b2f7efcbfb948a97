// Package topics names Sundial's Kafka topics and says how each is created.
//
// Every component gets topic names from a Names value, never from string
// literals, so that tests (and several installations on one cluster) can put a
// prefix in front of every name and never see each other's records.
//
// Invariants:
//   - Partition counts are part of the design, not tuning: records are keyed
//     by job id, so changing a topic's partition count moves jobs between
//     partitions and breaks per-job ordering. Ensure therefore refuses a topic
//     that exists with another count instead of "fixing" it.
//   - sundial.shards has exactly one partition per shard (S, fixed at cluster
//     initialisation): dispatchers own shards by owning its partitions in a
//     consumer group. Its records are wake-ups (package enqueue): a due entry,
//     keyed by job id, on the partition of the job's shard, telling the owner
//     about an entry that falls due inside the window it has already loaded
//     or in the past. The schedule store stays the truth; a wake-up is only
//     needed until its entry has fired, hence the short retention.
//   - A team's job topic, sundial.jobs.<team>, is laid out as sundial.jobs
//     (same partitions, compacted); its name is the team's identity, which
//     Kafka ACLs protect, so team names are restricted (ValidTeam) and
//     "status" is reserved. Consumers of definitions read the team topics
//     by regular expression (JobsTopicPatterns).
//   - sundial.events carries RunEvents and DagRunEvents. Every reader tells
//     them apart with DecodeRunEvent (the content-type's message type, else
//     the sundial-kind header), the one home of that rule.
//   - sundial.audit carries the audit trail's feed (package audit), written
//     by Sundial's own processes only.
//   - sundial.jobs and sundial.jobs.status are compacted: the latest record of
//     each job id is kept forever (a tombstone deletes), so a registry can
//     rebuild from the topic. sundial.executors is compacted too: the newest
//     announcement of each executor is kept until its tombstone (package
//     discovery). The other topics are time-retained.
//
// Ensure creates topics through franz-go's kadm admin client; it is
// idempotent and safe to run concurrently with another Ensure.
//
// The replication factor is the caller's; -1 (the default of `sundial
// migrate`) takes the brokers' default.replication.factor, and no topic sets
// min.insync.replicas, so each inherits the brokers' value. A cluster's
// brokers therefore decide: the local three-broker cluster
// (deploy/local/cluster.sh) says 3 and 2, the single-node stack 1 and 1.
package topics
