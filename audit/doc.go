// Package audit is Sundial's audit trail: who changed which job or DAG
// definition, or took which operator action, when, and what changed, field
// by field.
//
// # Records
//
// A Record names its actor ("kafka:<topic>" for a definition that came
// through Kafka, "token:<id>" for an API token, "oidc:<issuer>#<subject>"
// for an OIDC subject), the action (job.created, job.updated, job.deleted,
// and the operator actions their callers name), the job or DAG id, the
// owning team, the store revision before and after, and the changed fields
// (Diff, computed from the protobuf messages by reflection, so a field added
// to JobSpec or DagSpec is diffed without a change here).
//
// # Invariants
//
//   - A Record's ID identifies the change, not the attempt to record it: a
//     definition's ID is its Kafka record (topic, partition, offset), so a
//     redelivered record writes the same row again instead of a second one.
//     Recording is idempotent and may be retried.
//   - The store is the trail (Trail.Keep); sundial.audit is a feed of it
//     for other systems. Trail.Record keeps a record, then publishes it: a
//     record on the topic is always in the store. The registry keeps its
//     records itself and produces their feed records with its answers
//     (KafkaRecord), so that a definition's offset is committed only once
//     both are acknowledged.
//   - Rows expire after the retention (Config.Retention, default 90 days),
//     set as a TTL on every write.
//   - Only Sundial's own processes write the trail. They are the ones that
//     hold the store's credentials, and on a secured Kafka only Sundial's
//     service principal may write sundial.audit (docs/production.md,
//     "Ownership"): a team's token or Kafka user has no path to it.
//   - Values in a diff are shown as text, each cut to MaxValue bytes, so a
//     large payload does not make a large row.
//   - No secret is kept: Diff redacts the secret header values and URL
//     parts of every HTTP target (package jobspec's rule) before it
//     compares, so a row and a feed record say "<redacted>", or "<redacted
//     changed>" after a secret that changed, and never hold a value or a
//     hash of one. Keeping, publishing and listing take secrets out of a
//     change's text too, so a row kept before diffs were redacted is never
//     shown with its secrets, and a change a caller built itself is never
//     kept with them.
//
// # Dependencies
//
// google.golang.org/protobuf (protoreflect) computes the diffs; package
// jobspec says which values are secret;
// github.com/twmb/franz-go produces the feed.
package audit
