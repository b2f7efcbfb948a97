// Package registry is Sundial's job registry: it reads job definitions from
// the team topics sundial.jobs.<team> and the shared sundial.jobs, checks them, stores them with their first occurrence, wakes
// the dispatcher that owns them, and answers every record on
// sundial.jobs.status. What a definition is (its validation, decoding,
// schedule compilation and first due time) is package jobspec, which the Go
// client, the dispatcher and the DAG engine share with it.
//
// # Records
//
// A record's key is the job id; its content-type header says protobuf
// (application/x-protobuf, the default) or JSON (application/json,
// protojson, unknown fields refused); a record without a value (a tombstone)
// deletes the job. Records with the header sundial-kind: dag are DAG
// definitions, left to the DAG engine: the registry neither stores nor
// answers them.
//
// # Ownership
//
// The registry consumes every topic matching sundial.jobs.<team>
// (topics.Names.JobsTopicPatterns, by regular expression, so a new team's
// topic is read without a restart) and, only with Config.SharedTopic (--jobs-shared-topic=true),
// sundial.jobs. Kafka ACLs decide who may write a team's topic, so the team
// of a record on it is the topic's, never what the record claims:
//
//   - a definition whose owner_team is not the topic's team is REJECTED,
//     field owner_team;
//   - a definition or tombstone for an id whose definition in force belongs
//     to another team is REJECTED, field owner_team, without naming that
//     team: no team overwrites or deletes another's job.
//
// Records on sundial.jobs carry no identity and are not checked: whoever may
// write it may change any job. The start-up log and the gauge
// sundial_registry_ownership_enforced say which mode is in force. A job's
// revision is the offset of its record in its topic, so a job's records
// must all go through one topic. Two teams creating one new id at the same
// instant on their two topics are not serialised: the definition stored
// last owns the job.
//
// # Audit
//
// With Config.Audit, every accepted change (CREATED, UPDATED, and DELETED
// of a job that existed) is kept in the audit trail (package audit) before
// the record is answered, with the actor kafka:<topic>, the revisions before
// and after and the field-level diff; its feed record on sundial.audit is
// produced with the answer. A record is kept after the store write: a
// registry that dies in between leaves the change without its record (the
// redelivered definition is UNCHANGED).
//
// # Validation
//
// Every record is decoded and checked by jobspec.DecodeDefinition, and
// answered REJECTED with every field at fault (jobspec.FieldError) when it
// fails. Bounds (payload size, label count, ...) are in jobspec.Limits and
// the jobspec.Max* constants; Config.Limits sets this registry's.
//
// # Invariants
//
//   - Every record gets exactly one answer per processing, keyed by the
//     record's own key, in the record's encoding, naming its source (topic,
//     partition, offset). Nothing wrong with one record (undecodable, invalid,
//     key and id differ) stops consumption or affects the records around it:
//     it is answered REJECTED with the fields at fault.
//   - Transient failures are never rejections: store and Kafka errors are
//     retried with capped, jittered exponential backoff until they succeed or
//     the registry stops. The one exception is an error the store marks as
//     store.ErrInvalid (it refuses the arguments, so no retry can succeed):
//     the record is answered REJECTED with field "record" rather than
//     blocking its partition for good.
//   - At least once: offsets are committed only after the record's store
//     writes, wake-up and status are acknowledged (internal/consume). The
//     wake-up is produced with the answer, not before it, so a record waits
//     only on its store calls (a read and plain writes: no lightweight
//     transaction, see package store); records of different jobs are
//     processed Config.Concurrency at a time. Each record reads the job in
//     force once (for ownership, the audit trail, its revision, its quota
//     and whether it resumes a paused job), and that read joins the next
//     store.GetJobs call. Their upserts go to the store
//     together: a record's job joins the next store.UpsertJobs call (at
//     most 4 in flight, 1024 jobs each; no timer, so a lone record goes at
//     once), which writes the first occurrences of all its jobs in one
//     batch per partition, then their rows in batches of many jobs. The
//     outcome of each job is the one UpsertJob would give. A redelivered
//     record changes nothing: the store's revision of a job is the offset of its record on sundial.jobs (all records of a job share a
//     partition), an identical definition is a no-op (UNCHANGED) and an older
//     record is ignored (STALE). Replaying the topic from any offset therefore
//     writes no due entry and leaves every job as it was.
//   - Determinism: the first due time is computed from the record's timestamp
//     (see jobspec.FirstDue), so reading a record again gives the same due
//     time and run id. The clock only matters when the record is older than
//     its schedule's catch-up window.
//   - A changed definition replaces the pending entry in one store call
//     (store.UpsertJob): the new first occurrence is written, the old entry is
//     deleted, and an entry of the old definition that survives (one the
//     dispatcher already holds) is dead because its revision is no longer the
//     job's. Nothing fires twice and the new schedule applies from its next
//     occurrence. The job row is written at the write timestamp of its
//     revision, so even a replay racing a newer definition cannot bring an
//     older one back.
//   - Paused jobs are stored with nothing scheduled; a definition that
//     resumes one schedules its first occurrence from the moment of the
//     pause (the paused definition's timestamp), so occurrences that fell
//     due while paused follow the misfire policy, and puts back the entries
//     the dispatchers held meanwhile (retries, deferrals, triggers, DAG
//     nodes; held.go) with their wake-ups, before it answers. An UNCHANGED
//     definition that is not paused releases held entries too, which
//     finishes the release of a registry that died half-way.
//   - A tombstone deletes the job and its pending entry (store.DeleteJob),
//     and the entries it held while paused. A
//     delete leaves a tombstone in the store, so a replayed older definition
//     cannot bring the job back.
//
// # Outcomes
//
// CREATED, UPDATED, UNCHANGED and DELETED are accepted; REJECTED lists the
// errors; STALE answers a record older than the one in force (a replay).
// Deleting an unknown or already deleted id is DELETED. Resending a definition
// identical to the one in force is UNCHANGED and schedules nothing new: to
// restart a delay or re-fire an immediate job, change the definition (its
// revision, say) or use a trigger. When the definition sets revision, a lower
// revision than the one in force, or the same revision with a different
// definition, is REJECTED naming "revision".
//
// # Quotas
//
// With Config.Quotas set, a definition that would create a job (an id the
// store does not hold, or holds deleted) is REJECTED when its owner_team
// already has its max_jobs jobs, with a field error on owner_team that names
// the count, the limit and the quota ("team payments has 1000 of 1000 jobs
// (quota max_jobs)"). Updates and deletes of existing jobs always pass.
// Every job stored is indexed under its team and every delete removes it,
// at the record's offset, so redelivery and replays count each job once
// (package quota says why a set and not a counter, and bounds the overshoot
// under concurrent creates). Quotas are read through a cache
// (Config.QuotaTTL); the count is read from the index for each create of a
// team with a limit. The creates of such a team are counted, stored and
// indexed one after the other (a lock per team, quotas.go), so the creates
// one registry handles at once (a bulk apply) cannot pass the limit. A
// create is refused only after the limit has been read again from the
// store, so a raised limit applies to the next definition.
//
// # Lifecycle
//
// Start joins the consumer group and Stop leaves it (internal/lifecycle):
// Stop is idempotent, safe before Start, and returns once the processing
// goroutine has exited and the Kafka client is closed. A stopped Registry may
// be started again; it then resumes from the group's committed offsets.
//
// # Metrics
//
// sundial_registry_records_total{outcome}, sundial_registry_rejections_total
// {field} (the field path without indexes and map keys, a bounded set),
// sundial_registry_retries_total{op}, sundial_registry_quota_rejections_total
// {quota}, sundial_registry_processing_seconds, sundial_registry_lag_seconds
// and sundial_registry_ownership_enforced, registered on the injected
// Registerer.
//
// # Dependencies
//
// github.com/twmb/franz-go is the Kafka client of the whole project.
// github.com/prometheus/client_golang provides the metrics.
package registry
