// Package jobspec is what a Sundial job definition is, apart from any
// process that reads or runs one: the rules a JobSpec must satisfy, its
// limits and id rules, how its schedule compiles, when it is first due, how
// missed occurrences are caught up, how records of sundial.jobs and
// sundial.triggers decode, and how an answer on sundial.jobs.status is
// built. The registry, the trigger consumer, the dispatcher, the DAG engine,
// the Go client and the sundial command all use it, so a definition means
// the same thing wherever it is read.
//
// # Invariants
//
//   - Pure: no I/O, no clock, no goroutines, no metrics, no package state.
//     Every function that depends on time takes the instants it needs
//     (accepted, now) as arguments, so the same record gives the same answer
//     on any machine and at any replay.
//   - A library: it imports neither the processes (registry, trigger,
//     dispatcher, runner, dagengine, store) nor Prometheus, so the client
//     can use it without pulling them in. internal/layering fails the tests
//     when it, package client or package schedule does.
//   - Every problem at once: Validate, DecodeDefinition and DecodeTrigger
//     report every bad value, each as a FieldError naming the field by its
//     protobuf path ("schedule.cron.expression", "labels[\"env\"]",
//     "retry.non_retryable_errors[1]") and the reason. Problems with the
//     record rather than a field use "key", "content_type" or "record".
//     Nothing invalid is silently repaired or ignored.
//   - Validation reads no clock: an "at" instant in the past is valid. It is
//     a misfire at acceptance, and the schedule's misfire policy decides
//     whether it still fires (SKIP: never; otherwise at once, if it is inside
//     the catch-up window; see FirstDue).
//   - One misfire rule: CatchUp decides, for every component that fires
//     occurrences (the dispatcher for jobs, the DAG engine for DAGs, the
//     registry for a definition read late), which missed occurrences fire
//     and where the schedule continues. It never steps through the
//     occurrences one by one: it searches the catch-up window with jumps, and
//     FIRE_ALL fires at most a given number at once.
//   - One secrets rule (secrets.go): which header and query values of an
//     HTTP target are secret (IsSecretHeader, IsSecretQueryParam), the
//     secret reference syntax "${secret:NAME}" (SecretRefs,
//     ExpandSecretRefs), and how a definition is shown: Redact for every
//     answer, RedactPair for every diff (a changed secret reads "<redacted
//     changed>", never a value or a hash), RedactURL for any text, and
//     KeepRedacted for a definition applied back with "<redacted>" values.
//     The API, the audit trail and the runner all use it, so what is
//     hidden is the same everywhere.
//   - One schema, two spellings (file.go): DecodeFile reads the files people
//     write (JSON, JSON lines, YAML) in the JobSpec's protobuf JSON form or
//     with short enum names and Go or ISO 8601 durations, walking the
//     JobSpec's descriptor, so no second schema exists to drift; it reports
//     every problem of a definition at once with its line. Records on Kafka
//     and API calls keep the protobuf JSON form only (DecodeDefinition).
//   - A status carries at most MaxReportedErrors errors, all in valid UTF-8,
//     so that every record, however bad, can be answered.
//
// # Dependencies
//
// package schedule (the calculator of fire times), the wire format
// (proto/sundial/v1), github.com/twmb/franz-go/pkg/kgo for its record
// type only: the decoders read records and StatusRecord builds one, and
// go.yaml.in/yaml/v3 for DecodeFile's YAML (its nodes carry the lines).
package jobspec
