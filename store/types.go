package store

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"time"
)

// ShardOf returns the shard of a job: the FNV-1a 32-bit hash of its id modulo
// shards. It panics if shards is not positive, which would be a programming
// error: the count comes from the stored cluster config.
func ShardOf(jobID string, shards int) int {
	if shards <= 0 {
		panic(fmt.Sprintf("store.ShardOf: shards = %d, must be positive", shards))
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(jobID)) // never fails
	return int(h.Sum32() % uint32(shards))
}

// BucketOf returns the bucket of a due time: its UTC minute.
func BucketOf(t time.Time) time.Time {
	return t.UTC().Truncate(time.Minute)
}

// Truncate returns t in UTC at the store's precision, the millisecond.
func Truncate(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Truncate(time.Millisecond)
}

// RunID returns the id of the run of a job due at due:
// job id + "@" + due time as UTC unix milliseconds.
func RunID(jobID string, due time.Time) string {
	return jobID + "@" + strconv.FormatInt(due.UnixMilli(), 10)
}

// SpecHash is the content hash the store keeps to recognise an identical
// upsert: SHA-256 of the serialized spec.
func SpecHash(spec []byte) []byte {
	sum := sha256.Sum256(spec)
	return sum[:]
}

// Kind says why a due entry exists.
type Kind string

// Kinds of due entries.
const (
	// KindScheduled is an occurrence of the job's own schedule. It is live
	// only while its Revision is the job's (see the package doc).
	KindScheduled Kind = "scheduled"
	// KindRetry is a later attempt of a failed run; RunID is the run's.
	KindRetry Kind = "retry"
	// KindTrigger is an immediate or API-triggered run.
	KindTrigger Kind = "trigger"
	// KindDAG is a run started by the DAG engine for a dependent job.
	KindDAG Kind = "dag"
)

// Valid reports whether k is one of the defined kinds.
func (k Kind) Valid() bool {
	switch k {
	case KindScheduled, KindRetry, KindTrigger, KindDAG:
		return true
	}
	return false
}

// DueKey identifies a due entry within the schedule. Its partition follows
// from it: (BucketOf(Due), ShardOf(JobID, S)).
type DueKey struct {
	Due   time.Time
	JobID string
	Kind  Kind
	RunID string
}

// DueEntry is one thing that falls due: a run (or attempt of a run) of a job.
type DueEntry struct {
	// Due is when the entry fires.
	Due time.Time
	// JobID is the job the entry runs; it decides the shard.
	JobID string
	// Kind says why the entry exists.
	Kind Kind
	// RunID is the run's deterministic id; see RunID.
	RunID string
	// Attempt is the attempt number, 1 for the first.
	Attempt int
	// Revision is the job definition's revision the entry was made from.
	Revision int64
	// Payload optionally carries a serialized Run (retry, DAG) or Trigger
	// (trigger), or the job's JobSnapshot (scheduled).
	Payload []byte
}

// Key returns the entry's key.
func (e DueEntry) Key() DueKey {
	return DueKey{Due: e.Due, JobID: e.JobID, Kind: e.Kind, RunID: e.RunID}
}

// Validate reports every bad field of the entry.
func (e DueEntry) Validate() error {
	errs := []error{e.Key().Validate()}
	if e.Attempt < 1 {
		errs = append(errs, fmt.Errorf("%w: attempt %d: must be at least 1", ErrInvalid, e.Attempt))
	}
	if e.Revision < 0 {
		errs = append(errs, fmt.Errorf("%w: revision %d: must not be negative", ErrInvalid, e.Revision))
	}
	return errors.Join(errs...)
}

// Validate reports every bad field of the key.
func (k DueKey) Validate() error {
	var errs []error
	if k.Due.IsZero() {
		errs = append(errs, fmt.Errorf("%w: due: must be set", ErrInvalid))
	}
	if k.JobID == "" {
		errs = append(errs, fmt.Errorf("%w: job id: must not be empty", ErrInvalid))
	}
	if !k.Kind.Valid() {
		errs = append(errs, fmt.Errorf("%w: kind %q: must be scheduled, retry, trigger or dag", ErrInvalid, k.Kind))
	}
	if k.RunID == "" {
		errs = append(errs, fmt.Errorf("%w: run id: must not be empty", ErrInvalid))
	}
	return errors.Join(errs...)
}

// Job is a stored job definition.
type Job struct {
	// ID is the job id, the key of sundial.jobs.
	ID string
	// Spec is the serialized JobSpec; the store does not decode it.
	Spec []byte
	// Revision orders the definitions of one job; a change applies only
	// with a revision newer than the stored one.
	Revision int64
	// UpdatedAt is when the definition was produced.
	UpdatedAt time.Time
	// NextDue is the first occurrence this definition schedules; zero for
	// none. UpsertJob writes its KindScheduled entry.
	NextDue time.Time

	// Hash is SpecHash(Spec), set by the store.
	Hash []byte
	// Deleted marks a tombstone, set by the store.
	Deleted bool
}

// Validate reports every bad field of a job to upsert.
func (j Job) Validate() error {
	var errs []error
	if j.ID == "" {
		errs = append(errs, fmt.Errorf("%w: job id: must not be empty", ErrInvalid))
	}
	if len(j.Spec) == 0 {
		errs = append(errs, fmt.Errorf("%w: job %q spec: must not be empty", ErrInvalid, j.ID))
	}
	if j.Revision < 0 {
		errs = append(errs, fmt.Errorf("%w: job %q revision %d: must not be negative", ErrInvalid, j.ID, j.Revision))
	}
	if j.UpdatedAt.IsZero() {
		errs = append(errs, fmt.Errorf("%w: job %q updated at: must be set", ErrInvalid, j.ID))
	}
	return errors.Join(errs...)
}

// ScheduledEntry returns the KindScheduled entry of the job's NextDue. It
// carries the job's snapshot, checked at UpdatedAt, so that firing it needs
// no read of the job.
func (j Job) ScheduledEntry() DueEntry {
	due := Truncate(j.NextDue)
	return DueEntry{
		Due:      due,
		JobID:    j.ID,
		Kind:     KindScheduled,
		RunID:    RunID(j.ID, due),
		Attempt:  1,
		Revision: j.Revision,
		Payload:  j.Snapshot(j.UpdatedAt).Encode(),
	}
}

// Outcome says what an upsert or delete did.
type Outcome int

// Outcomes of UpsertJob and DeleteJob.
const (
	// OutcomeCreated: the job did not exist (or was a tombstone) and now does.
	OutcomeCreated Outcome = iota + 1
	// OutcomeUpdated: the definition changed.
	OutcomeUpdated
	// OutcomeUnchanged: the stored state already was the requested one.
	OutcomeUnchanged
	// OutcomeStale: the revision is not newer than the stored one; nothing
	// was written.
	OutcomeStale
	// OutcomeDeleted: the job is now a tombstone.
	OutcomeDeleted
)

func (o Outcome) String() string {
	switch o {
	case OutcomeCreated:
		return "created"
	case OutcomeUpdated:
		return "updated"
	case OutcomeUnchanged:
		return "unchanged"
	case OutcomeStale:
		return "stale"
	case OutcomeDeleted:
		return "deleted"
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// ClusterConfig is what InitCluster fixed.
type ClusterConfig struct {
	// Shards is S, the number of shards.
	Shards int
	// CreatedAt is when the cluster was initialised.
	CreatedAt time.Time
}

// ShardState is a shard's fencing epoch, owner and watermark.
type ShardState struct {
	Shard int
	// Epoch is bumped by every successful claim; 0 means never claimed.
	Epoch int64
	// Owner is the last successful claimant.
	Owner string
	// Watermark is the due time up to which every entry of the shard has
	// been dispatched; zero if never advanced.
	Watermark time.Time
	// ClaimedAt is when the last claim succeeded.
	ClaimedAt time.Time
}

// RunState is the state of one attempt of a run.
type RunState string

// Run states kept in history.
const (
	// StateScheduled: the attempt is due at AttemptDue and has not started.
	StateScheduled RunState = "scheduled"
	StateRunning   RunState = "running"
	StateSucceeded RunState = "succeeded"
	StateFailed    RunState = "failed"
	// StateSkipped: not executed (overlap policy forbid, misfire skip).
	StateSkipped   RunState = "skipped"
	StateCancelled RunState = "cancelled"
	// StateSuspended: an operator suspended the attempt after a
	// checkpoint; not terminal and not running, it waits for a resume.
	StateSuspended RunState = "suspended"
)

// Valid reports whether s is one of the defined states.
func (s RunState) Valid() bool {
	switch s {
	case StateScheduled, StateRunning, StateSucceeded, StateFailed, StateSkipped, StateCancelled, StateSuspended:
		return true
	}
	return false
}

// RunRecord is the latest known state of one attempt of a run.
type RunRecord struct {
	JobID   string
	RunID   string
	Attempt int
	// Due is the run's due time (the one in its run id).
	Due time.Time
	// AttemptDue is when this attempt was due to start (a retry's time);
	// zero means Due.
	AttemptDue time.Time
	State      RunState
	Started    time.Time
	Finished   time.Time
	Duration   time.Duration
	// Error is the failure's message, empty on success.
	Error string
	// Log is the last lines the attempt logged (a worker handler's run
	// logger, an exec target's output), set by its final state. A newer
	// record with no Log leaves the stored one in place.
	Log []string
	// UpdatedAt is when the state change happened; it orders writes of
	// the same attempt.
	UpdatedAt time.Time
	// OwnerTeam is the team that owned the job when the attempt ran; a
	// record with one is listed by RunIndex.
	OwnerTeam string
	// WaitReason is the attempt's last reported wait (package lateness).
	// A newer record with none leaves the stored one in place.
	WaitReason string
	// Dispatched, Received and Leased are when the run record was written,
	// fetched by a runner and leased (zero: unknown). A newer record with a
	// zero one leaves the stored one in place.
	Dispatched, Received, Leased time.Time
}

// LateBy is how late the attempt started: from its due time (AttemptDue,
// or Due) to Started, or, for an attempt scheduled or running without a
// start, to now. An attempt that ended without starting (skipped,
// cancelled) is late by 0.
func (r RunRecord) LateBy(now time.Time) time.Duration {
	due := r.AttemptDue
	if due.IsZero() {
		due = r.Due
	}
	switch {
	case !r.Started.IsZero():
		return max(r.Started.Sub(due), 0)
	case r.State == StateScheduled || r.State == StateRunning:
		return max(now.Sub(due), 0)
	}
	return 0
}

// RunBucket is the hour of due time a RunIndex files a record under.
func RunBucket(due time.Time) time.Time { return due.UTC().Truncate(time.Hour) }

// RunKey names one record in CompareRuns order: where a page of
// ListTeamRuns ended.
type RunKey struct {
	Due     time.Time
	RunID   string
	Attempt int
}

// KeyOf returns r's key.
func KeyOf(r RunRecord) RunKey { return RunKey{Due: r.Due, RunID: r.RunID, Attempt: r.Attempt} }

// After reports whether r comes after k in CompareRuns order.
func (k RunKey) After(r RunRecord) bool {
	return CompareRuns(RunRecord{Due: k.Due, RunID: k.RunID, Attempt: k.Attempt}, r) < 0
}

// TeamRunsQuery selects a team's records for RunIndex.ListTeamRuns.
type TeamRunsQuery struct {
	Team     string
	From, To time.Time
	// After, when set, is the last record of the previous page.
	After *RunKey
	// Keep filters the records; nil keeps every one.
	Keep  func(RunRecord) bool
	Limit int
}

// Validate reports every bad field of the query.
func (q TeamRunsQuery) Validate() error {
	var errs []error
	if q.Team == "" {
		errs = append(errs, fmt.Errorf("%w: team runs query team: must not be empty", ErrInvalid))
	}
	if q.From.IsZero() || q.To.IsZero() || !q.From.Before(q.To) {
		errs = append(errs, fmt.Errorf("%w: team runs query window [%s, %s): must be set and not empty", ErrInvalid, q.From, q.To))
	}
	if q.Limit < 1 {
		errs = append(errs, fmt.Errorf("%w: team runs query limit %d: must be at least 1", ErrInvalid, q.Limit))
	}
	return errors.Join(errs...)
}

// Validate reports every bad field of the record.
func (r RunRecord) Validate() error {
	var errs []error
	if r.JobID == "" {
		errs = append(errs, fmt.Errorf("%w: run record job id: must not be empty", ErrInvalid))
	}
	if r.RunID == "" {
		errs = append(errs, fmt.Errorf("%w: run record run id: must not be empty", ErrInvalid))
	}
	if r.Attempt < 1 {
		errs = append(errs, fmt.Errorf("%w: run record attempt %d: must be at least 1", ErrInvalid, r.Attempt))
	}
	if r.Due.IsZero() {
		errs = append(errs, fmt.Errorf("%w: run record due: must be set", ErrInvalid))
	}
	if !r.State.Valid() {
		errs = append(errs, fmt.Errorf("%w: run record state %q: unknown", ErrInvalid, r.State))
	}
	if r.UpdatedAt.IsZero() {
		errs = append(errs, fmt.Errorf("%w: run record updated at: must be set", ErrInvalid))
	}
	if r.Duration < 0 {
		errs = append(errs, fmt.Errorf("%w: run record duration %s: must not be negative", ErrInvalid, r.Duration))
	}
	return errors.Join(errs...)
}

// Normalize returns the record with its times in UTC at millisecond precision
// and AttemptDue defaulted to Due.
func (r RunRecord) Normalize() RunRecord {
	r.Due = Truncate(r.Due)
	r.AttemptDue = Truncate(r.AttemptDue)
	if r.AttemptDue.IsZero() {
		r.AttemptDue = r.Due
	}
	r.Started = Truncate(r.Started)
	r.Finished = Truncate(r.Finished)
	r.UpdatedAt = Truncate(r.UpdatedAt)
	r.Duration = r.Duration.Truncate(time.Millisecond)
	r.Dispatched = Truncate(r.Dispatched)
	r.Received = Truncate(r.Received)
	r.Leased = Truncate(r.Leased)
	return r
}

// Summary summarises a job's retained run history.
type Summary struct {
	JobID string
	// LastRun is the newest attempt that is not merely scheduled; nil if
	// none is retained.
	LastRun *RunRecord
	// NextDue is when the most recently scheduled attempt after LastRun is
	// due; zero if none is recorded.
	NextDue time.Time
	// Runs counts distinct runs with an attempt that started or ended.
	Runs int
	// Attempts counts attempts that started or ended.
	Attempts int
	// Failures counts failed attempts.
	Failures int
}

// Summarize computes a Summary from a job's records in ListRuns order. Both
// implementations use it so they cannot disagree.
func Summarize(jobID string, records []RunRecord) Summary {
	s := Summary{JobID: jobID}
	runs := map[string]bool{}
	var next *RunRecord
	for i := range records {
		r := &records[i]
		if r.State == StateScheduled {
			if next == nil || r.UpdatedAt.After(next.UpdatedAt) {
				next = r
			}
			continue
		}
		if s.LastRun == nil {
			last := *r
			s.LastRun = &last
		}
		runs[r.RunID] = true
		s.Attempts++
		if r.State == StateFailed {
			s.Failures++
		}
	}
	s.Runs = len(runs)
	// The most recently written scheduled attempt is the current plan (an
	// older one may belong to a replaced definition), unless a newer attempt
	// already started, which superseded it.
	if next != nil && (s.LastRun == nil || next.AttemptDue.After(s.LastRun.AttemptDue)) {
		s.NextDue = next.AttemptDue
	}
	return s
}

// DecideUpsert returns what UpsertJob does with job given the stored row
// (nil when there is none). Both implementations use it so they cannot
// disagree.
func DecideUpsert(stored *Job, job Job) Outcome {
	switch {
	case stored == nil:
		return OutcomeCreated
	case !stored.Deleted && bytes.Equal(stored.Hash, SpecHash(job.Spec)):
		return OutcomeUnchanged
	case job.Revision <= stored.Revision:
		return OutcomeStale
	case stored.Deleted:
		return OutcomeCreated
	}
	return OutcomeUpdated
}

// DecideDelete returns what DeleteJob does given the stored row (nil when
// there is none). A job never seen still gets a tombstone, so that an older
// definition replayed later cannot create it.
func DecideDelete(stored *Job, revision int64) Outcome {
	switch {
	case stored == nil:
		return OutcomeDeleted
	case stored.Deleted:
		return OutcomeUnchanged
	case revision <= stored.Revision:
		return OutcomeStale
	}
	return OutcomeDeleted
}

// Supersedes reports whether the pending entry old must be deleted once the
// job row points at next: it exists and is not the very same key (a changed
// spec with an unchanged next due rewrites the entry in place).
func Supersedes(old, next time.Time) bool {
	return !old.IsZero() && !Truncate(old).Equal(Truncate(next))
}

// CheckTriggerDedupe reports every bad argument of TriggerDedupe.
func CheckTriggerDedupe(jobID, key string, due time.Time, ttl time.Duration) error {
	var errs []error
	if jobID == "" {
		errs = append(errs, fmt.Errorf("%w: trigger job id: must not be empty", ErrInvalid))
	}
	if key == "" {
		errs = append(errs, fmt.Errorf("%w: trigger idempotency key: must not be empty", ErrInvalid))
	}
	if due.IsZero() {
		errs = append(errs, fmt.Errorf("%w: trigger due: must be set", ErrInvalid))
	}
	if ttl < time.Second {
		errs = append(errs, fmt.Errorf("%w: trigger dedupe ttl %s: must be at least 1s", ErrInvalid, ttl))
	}
	return errors.Join(errs...)
}

// PlannedRecord is the record of the attempt the definition in force
// planned: its first occurrence (Job.NextDue), attempt 1, in state
// scheduled, as of the definition's UpdatedAt. No history row holds it:
// the stores derive it from the job row when they read a job's history
// (WithPlanned), so registering a definition writes the row alone. ok is
// false when the row plans nothing (deleted, paused) or when a record
// written at UpdatedAt would have expired by now under retention, as the
// rows of the history do.
func PlannedRecord(j Job, now time.Time, retention time.Duration) (RunRecord, bool) {
	if j.Deleted || j.NextDue.IsZero() || !now.Before(j.UpdatedAt.Add(retention)) {
		return RunRecord{}, false
	}
	e := j.ScheduledEntry()
	return RunRecord{
		JobID: j.ID, RunID: e.RunID, Attempt: 1, Due: e.Due, AttemptDue: e.Due,
		State: StateScheduled, UpdatedAt: Truncate(j.UpdatedAt),
	}, true
}

// WithPlanned returns recs (a job's records in ListRuns order: due time
// descending, run id ascending, attempt descending) with planned in its
// place, unless a record of the same run and attempt is among them: the
// attempt's own history (enqueued, running, ...) replaces its plan. limit
// (0: none) bounds the result as it bounded recs.
func WithPlanned(recs []RunRecord, planned RunRecord, limit int) []RunRecord {
	i := 0
	for ; i < len(recs); i++ {
		r := recs[i]
		if r.RunID == planned.RunID && r.Attempt == planned.Attempt {
			return recs
		}
		if CompareRuns(r, planned) > 0 {
			break
		}
	}
	if limit > 0 && i >= limit {
		return recs
	}
	out := slices.Insert(slices.Clone(recs), i, planned)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// CompareRuns is the order of ListRuns, Cassandra's clustering order of
// run records: due time descending, run id ascending, attempt descending.
func CompareRuns(a, b RunRecord) int {
	return cmp.Or(b.Due.Compare(a.Due), cmp.Compare(a.RunID, b.RunID), cmp.Compare(b.Attempt, a.Attempt))
}
