// Package sundialv1 is Sundial's wire format: every message that crosses
// Kafka, generated from the .proto files beside this file (package
// sundial.v1). The .proto files are the reference; their comments state each
// field's meaning, units and defaults. docs/job-definition.md shows the JSON
// form of job definitions with examples that the tests of this package parse,
// so the documentation cannot drift from the schema.
//
// # Topics and messages
//
//	sundial.jobs            JobSpec, or DagSpec with header sundial-kind: dag; key = id; tombstone deletes
//	sundial.jobs.status     JobStatus, the registry's answer to each record on sundial.jobs; key = id
//	sundial.triggers        Trigger; key = job id
//	sundial.runs.<priority> Run; key = job id
//	sundial.events          RunEvent, or DagRunEvent with header sundial-kind: dag_run_event; key = job or DAG id
//	sundial.dlq             DeadLetter; key = job id
//	sundial.shards          DueEntry, a wake-up for the dispatcher owning the job's shard; key = job id
//
// # Invariants
//
//   - Compatibility: a published field number, type or name never changes or
//     gets reused (make proto-breaking runs buf's FILE rules against the main
//     branch). Old records stay readable by new code and the reverse; both
//     binary protobuf and JSON (protojson) are supported encodings.
//   - Encoding: records from outside Sundial (sundial.jobs, sundial.triggers)
//     may be protobuf or JSON, said by the content-type header and decoded by
//     Unmarshal, which rejects unknown JSON fields rather than ignoring a
//     misspelled one. Records Sundial writes for itself are protobuf.
//   - Time: every Timestamp is an instant (UTC), used at millisecond
//     precision, the precision of run ids (job id + "@" + UTC unix
//     milliseconds).
//   - Generated code (*.pb.go) is never edited: change the .proto and run
//     make generate; make check-generate fails when they disagree.
//
// # Dependencies
//
// google.golang.org/protobuf is the Go protobuf runtime (binary and protojson
// encodings, well-known types). github.com/bufbuild/buf (lint, breaking-change
// check, generation) and protoc-gen-go are pinned as Go tools in go.mod, so
// make generate needs nothing but the Go toolchain.
package sundialv1
