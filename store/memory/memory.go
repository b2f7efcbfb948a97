package memory

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sundialhq/sundial/internal/deps"
	"github.com/sundialhq/sundial/store"
)

// DefaultRunRetention is how long run history is kept unless configured.
const DefaultRunRetention = 7 * 24 * time.Hour

// Options configure a Store. The zero value is usable.
type Options struct {
	// Now is the clock; defaults to time.Now.
	Now func() time.Time
	// RunRetention is how long a run record is kept after its last write;
	// defaults to DefaultRunRetention.
	RunRetention time.Duration
}

// Store is an in-memory store.Store. Its zero value is not usable; call New.
type Store struct {
	now       func() time.Time
	retention time.Duration

	mu      sync.Mutex
	cluster *store.ClusterConfig
	jobs    map[string]store.Job
	due     map[partition]map[entryKey]store.DueEntry
	shards  map[int]store.ShardState
	runs    map[string]map[runKey]storedRun
	// triggers maps job id + "\x00" + idempotency key to its first due.
	triggers map[string]triggerKey
	// dags and dagRuns hold DAG definitions and DAG-run state (dags.go).
	dags    map[string]store.Dag
	dagRuns map[string]store.DagRun
	// held holds the entries of paused jobs by job id (held.go), made on
	// first use.
	held map[string]map[entryKey]store.DueEntry
}

var _ store.Store = (*Store)(nil)

type partition struct {
	bucket int64 // unix ms
	shard  int
}

type entryKey struct {
	due   int64 // unix ms
	jobID string
	kind  store.Kind
	runID string
}

type runKey struct {
	runID   string
	attempt int
}

type storedRun struct {
	rec store.RunRecord
	// at is rec's UpdatedAt at microsecond precision, which orders writes;
	// rec keeps it at millisecond precision, as it is returned.
	at      time.Time
	expires time.Time
}

// New returns an empty store.
func New(opts Options) (*Store, error) {
	if opts.RunRetention < 0 {
		return nil, fmt.Errorf("memory store: run retention %s: must not be negative", opts.RunRetention)
	}
	opts.Now = deps.Clock(opts.Now)
	return &Store{
		now:       opts.Now,
		retention: cmp.Or(opts.RunRetention, DefaultRunRetention),
		jobs:      map[string]store.Job{},
		due:       map[partition]map[entryKey]store.DueEntry{},
		shards:    map[int]store.ShardState{},
		runs:      map[string]map[runKey]storedRun{},
		triggers:  map[string]triggerKey{},
		dags:      map[string]store.Dag{},
		dagRuns:   map[string]store.DagRun{},
	}, nil
}

// Close does nothing; the store stays usable.
func (s *Store) Close() error { return nil }

// InitCluster implements store.Cluster.
func (s *Store) InitCluster(_ context.Context, shards int) (store.ClusterConfig, error) {
	if shards <= 0 {
		return store.ClusterConfig{}, fmt.Errorf("init cluster: %w: shards %d: must be positive", store.ErrInvalid, shards)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cluster != nil {
		if s.cluster.Shards != shards {
			return store.ClusterConfig{}, fmt.Errorf("init cluster: %w", &store.ShardCountError{Stored: s.cluster.Shards, Requested: shards})
		}
		return *s.cluster, nil
	}
	s.cluster = &store.ClusterConfig{Shards: shards, CreatedAt: store.Truncate(s.now())}
	return *s.cluster, nil
}

// GetClusterConfig implements store.Cluster.
func (s *Store) GetClusterConfig(context.Context) (store.ClusterConfig, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cluster == nil {
		return store.ClusterConfig{}, fmt.Errorf("get cluster config: %w", store.ErrNotInitialized)
	}
	return *s.cluster, nil
}

// shardCount returns S; the caller holds mu.
func (s *Store) shardCount() (int, error) {
	if s.cluster == nil {
		return 0, store.ErrNotInitialized
	}
	return s.cluster.Shards, nil
}

// UpsertJob implements store.Jobs.
func (s *Store) UpsertJob(_ context.Context, job store.Job) (store.Outcome, error) {
	if err := job.Validate(); err != nil {
		return 0, fmt.Errorf("upsert job: %w", err)
	}
	job.Spec = bytes.Clone(job.Spec)
	job.Hash = store.SpecHash(job.Spec)
	job.UpdatedAt = store.Truncate(job.UpdatedAt)
	job.NextDue = store.Truncate(job.NextDue)
	job.Deleted = false

	s.mu.Lock()
	defer s.mu.Unlock()
	shards, err := s.shardCount()
	if err != nil {
		return 0, fmt.Errorf("upsert job %q: %w", job.ID, err)
	}
	old, exists := s.jobs[job.ID]
	var stored *store.Job
	if exists {
		stored = &old
	}
	outcome := store.DecideUpsert(stored, job)
	if outcome != store.OutcomeCreated && outcome != store.OutcomeUpdated {
		return outcome, nil
	}
	if !job.NextDue.IsZero() {
		s.putDue(shards, job.ScheduledEntry())
	}
	s.jobs[job.ID] = job
	if exists && !old.Deleted && store.Supersedes(old.NextDue, job.NextDue) {
		s.deleteDue(shards, old.ScheduledEntry().Key())
	}
	return outcome, nil
}

// UpsertJobs implements store.Jobs: UpsertJob for each job in order.
func (s *Store) UpsertJobs(ctx context.Context, jobs []store.Job) ([]store.UpsertResult, error) {
	out := make([]store.UpsertResult, len(jobs))
	for i, job := range jobs {
		outcome, err := s.UpsertJob(ctx, job)
		if err != nil && !errors.Is(err, store.ErrInvalid) {
			return nil, err
		}
		out[i] = store.UpsertResult{Outcome: outcome, Err: err}
	}
	return out, nil
}

// DeleteJob implements store.Jobs.
func (s *Store) DeleteJob(_ context.Context, id string, revision int64, at time.Time) (store.Outcome, error) {
	if id == "" {
		return 0, fmt.Errorf("delete job: %w: job id: must not be empty", store.ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	shards, err := s.shardCount()
	if err != nil {
		return 0, fmt.Errorf("delete job %q: %w", id, err)
	}
	old, exists := s.jobs[id]
	var stored *store.Job
	if exists {
		stored = &old
	}
	outcome := store.DecideDelete(stored, revision)
	if outcome != store.OutcomeDeleted {
		return outcome, nil
	}
	s.jobs[id] = store.Job{ID: id, Revision: revision, UpdatedAt: store.Truncate(at), Deleted: true}
	if exists && !old.NextDue.IsZero() {
		s.deleteDue(shards, old.ScheduledEntry().Key())
	}
	return outcome, nil
}

// GetJob implements store.Jobs.
func (s *Store) GetJob(_ context.Context, id string) (store.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	job, ok := s.jobs[id]
	if !ok {
		return store.Job{}, fmt.Errorf("get job %q: %w", id, store.ErrNotFound)
	}
	job.Spec = bytes.Clone(job.Spec)
	job.Hash = bytes.Clone(job.Hash)
	return job, nil
}

// GetJobs implements store.Jobs.
func (s *Store) GetJobs(ctx context.Context, ids []string) (map[string]store.Job, error) {
	out := make(map[string]store.Job, len(ids))
	for _, id := range ids {
		job, err := s.GetJob(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[id] = job
	}
	return out, nil
}

// PutDue implements store.Schedule.
func (s *Store) PutDue(_ context.Context, entries ...store.DueEntry) error {
	for i, e := range entries {
		if err := e.Validate(); err != nil {
			return fmt.Errorf("put due entry %d: %w", i, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	shards, err := s.shardCount()
	if err != nil {
		return fmt.Errorf("put due: %w", err)
	}
	for _, e := range entries {
		s.putDue(shards, e)
	}
	return nil
}

func (s *Store) putDue(shards int, e store.DueEntry) {
	e.Due = store.Truncate(e.Due)
	e.Payload = bytes.Clone(e.Payload)
	if len(e.Payload) == 0 {
		e.Payload = nil // as Cassandra reads an empty blob
	}
	p := partition{bucket: store.BucketOf(e.Due).UnixMilli(), shard: store.ShardOf(e.JobID, shards)}
	part := s.due[p]
	if part == nil {
		part = map[entryKey]store.DueEntry{}
		s.due[p] = part
	}
	part[keyOf(e.Key())] = e
}

func keyOf(k store.DueKey) entryKey {
	return entryKey{due: store.Truncate(k.Due).UnixMilli(), jobID: k.JobID, kind: k.Kind, runID: k.RunID}
}

// ListBucket implements store.Schedule. It copies the partition under the
// lock and yields outside it, so the caller may write to the store while
// iterating.
func (s *Store) ListBucket(_ context.Context, bucket time.Time, shard int) iter.Seq2[store.DueEntry, error] {
	return func(yield func(store.DueEntry, error) bool) {
		entries, err := s.snapshotBucket(bucket, shard)
		if err != nil {
			yield(store.DueEntry{}, err)
			return
		}
		for _, e := range entries {
			if !yield(e, nil) {
				return
			}
		}
	}
}

func (s *Store) snapshotBucket(bucket time.Time, shard int) ([]store.DueEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	shards, err := s.shardCount()
	if err != nil {
		return nil, fmt.Errorf("list bucket: %w", err)
	}
	if err := store.CheckShard(shard, shards); err != nil {
		return nil, fmt.Errorf("list bucket: %w", err)
	}
	part := s.due[partition{bucket: store.BucketOf(bucket).UnixMilli(), shard: shard}]
	entries := make([]store.DueEntry, 0, len(part))
	for _, e := range part {
		e.Payload = bytes.Clone(e.Payload)
		entries = append(entries, e)
	}
	slices.SortFunc(entries, compareEntries)
	return entries, nil
}

// compareEntries is Cassandra's clustering order of due entries: due time,
// then job id, kind and run id as UTF-8 bytes.
func compareEntries(a, b store.DueEntry) int {
	return cmp.Or(
		a.Due.Compare(b.Due),
		cmp.Compare(a.JobID, b.JobID),
		cmp.Compare(a.Kind, b.Kind),
		cmp.Compare(a.RunID, b.RunID),
	)
}

// DeleteDue implements store.Schedule.
func (s *Store) DeleteDue(_ context.Context, keys ...store.DueKey) error {
	for i, k := range keys {
		if err := k.Validate(); err != nil {
			return fmt.Errorf("delete due entry %d: %w", i, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	shards, err := s.shardCount()
	if err != nil {
		return fmt.Errorf("delete due: %w", err)
	}
	for _, k := range keys {
		s.deleteDue(shards, k)
	}
	return nil
}

func (s *Store) deleteDue(shards int, k store.DueKey) {
	p := partition{bucket: store.BucketOf(k.Due).UnixMilli(), shard: store.ShardOf(k.JobID, shards)}
	if part := s.due[p]; part != nil {
		delete(part, keyOf(k))
		if len(part) == 0 {
			delete(s.due, p)
		}
	}
}

// DeleteBucket implements store.Schedule.
func (s *Store) DeleteBucket(_ context.Context, bucket time.Time, shard int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	shards, err := s.shardCount()
	if err != nil {
		return fmt.Errorf("delete bucket: %w", err)
	}
	if err := store.CheckShard(shard, shards); err != nil {
		return fmt.Errorf("delete bucket: %w", err)
	}
	delete(s.due, partition{bucket: store.BucketOf(bucket).UnixMilli(), shard: shard})
	return nil
}

// ClaimShard implements store.Shards.
func (s *Store) ClaimShard(_ context.Context, shard int, owner string, seen int64) (int64, error) {
	if owner == "" {
		return 0, fmt.Errorf("claim shard %d: %w: owner: must not be empty", shard, store.ErrInvalid)
	}
	if seen < 0 {
		return 0, fmt.Errorf("claim shard %d: %w: seen epoch %d: must not be negative", shard, store.ErrInvalid, seen)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkShard(shard); err != nil {
		return 0, fmt.Errorf("claim shard: %w", err)
	}
	st := s.shards[shard]
	if st.Epoch != seen {
		return 0, fmt.Errorf("claim shard %d at epoch %d (now %d): %w", shard, seen, st.Epoch, store.ErrEpochConflict)
	}
	st.Shard = shard
	st.Epoch = seen + 1
	st.Owner = owner
	st.ClaimedAt = store.Truncate(s.now())
	s.shards[shard] = st
	return st.Epoch, nil
}

func (s *Store) checkShard(shard int) error {
	shards, err := s.shardCount()
	if err != nil {
		return err
	}
	return store.CheckShard(shard, shards)
}

// AdvanceWatermark implements store.Shards.
func (s *Store) AdvanceWatermark(_ context.Context, shard int, epoch int64, t time.Time) error {
	if t.IsZero() {
		return fmt.Errorf("advance watermark of shard %d: %w: time: must be set", shard, store.ErrInvalid)
	}
	if epoch < 1 {
		return fmt.Errorf("advance watermark of shard %d: %w: epoch %d: must be at least 1 (an epoch ClaimShard returned)", shard, store.ErrInvalid, epoch)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkShard(shard); err != nil {
		return fmt.Errorf("advance watermark: %w", err)
	}
	st := s.shards[shard]
	if st.Epoch != epoch {
		return fmt.Errorf("advance watermark of shard %d at epoch %d (now %d): %w", shard, epoch, st.Epoch, store.ErrStaleEpoch)
	}
	if t = store.Truncate(t); t.After(st.Watermark) {
		st.Watermark = t
		s.shards[shard] = st
	}
	return nil
}

// GetShard implements store.Shards.
func (s *Store) GetShard(_ context.Context, shard int) (store.ShardState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkShard(shard); err != nil {
		return store.ShardState{}, fmt.Errorf("get shard: %w", err)
	}
	st := s.shards[shard]
	st.Shard = shard
	return st, nil
}

// RecordRun implements store.History.
func (s *Store) RecordRun(_ context.Context, rec store.RunRecord) error {
	if err := rec.Validate(); err != nil {
		return fmt.Errorf("record run: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recordRun(rec)
	return nil
}

// RecordRuns implements store.History.
func (s *Store) RecordRuns(_ context.Context, recs []store.RunRecord) error {
	for i, r := range recs {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("record runs: record %d: %w", i, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range recs {
		s.recordRun(r)
	}
	return nil
}

func (s *Store) recordRun(rec store.RunRecord) {
	at := rec.UpdatedAt.UTC().Truncate(time.Microsecond)
	rec = rec.Normalize()
	now := s.now()
	runs := s.runs[rec.JobID]
	if runs == nil {
		runs = map[runKey]storedRun{}
		s.runs[rec.JobID] = runs
	}
	k := runKey{runID: rec.RunID, attempt: rec.Attempt}
	if old, ok := runs[k]; ok && now.Before(old.expires) {
		if old.at.After(at) {
			return
		}
		if len(rec.Log) == 0 {
			// As in Cassandra, where an absent log is left unset.
			rec.Log = old.rec.Log
		}
		// So are an absent team, wait reason and times.
		rec.OwnerTeam = cmp.Or(rec.OwnerTeam, old.rec.OwnerTeam)
		rec.WaitReason = cmp.Or(rec.WaitReason, old.rec.WaitReason)
		for _, f := range []struct {
			dst *time.Time
			old time.Time
		}{
			{&rec.Dispatched, old.rec.Dispatched}, {&rec.Received, old.rec.Received}, {&rec.Leased, old.rec.Leased},
		} {
			if f.dst.IsZero() {
				*f.dst = f.old
			}
		}
	}
	runs[k] = storedRun{rec: rec, at: at, expires: now.Add(s.retention)}
}

// ListRuns implements store.History.
func (s *Store) ListRuns(_ context.Context, jobID string, limit int) ([]store.RunRecord, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("list runs of %q: %w: limit %d: must be positive", jobID, store.ErrInvalid, limit)
	}
	recs := s.history(jobID)
	if len(recs) > limit {
		recs = recs[:limit]
	}
	return s.withPlanned(jobID, recs, limit), nil
}

// JobSummary implements store.History.
func (s *Store) JobSummary(_ context.Context, jobID string) (store.Summary, error) {
	if jobID == "" {
		return store.Summary{}, fmt.Errorf("job summary: %w: job id: must not be empty", store.ErrInvalid)
	}
	return store.Summarize(jobID, s.withPlanned(jobID, s.history(jobID), 0)), nil
}

// withPlanned adds the attempt the job's definition planned to its
// records (store.PlannedRecord): registering a job writes no record.
func (s *Store) withPlanned(jobID string, recs []store.RunRecord, limit int) []store.RunRecord {
	s.mu.Lock()
	job, ok := s.jobs[jobID]
	now := s.now()
	s.mu.Unlock()
	if !ok {
		return recs
	}
	if planned, ok := store.PlannedRecord(job, now, s.retention); ok {
		return store.WithPlanned(recs, planned, limit)
	}
	return recs
}

// ListTeamRuns implements store.RunIndex over every job's records: the
// Cassandra store's index holds the same records.
func (s *Store) ListTeamRuns(_ context.Context, q store.TeamRunsQuery) ([]store.RunRecord, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("list team runs: %w", err)
	}
	s.mu.Lock()
	jobs := slices.Collect(maps.Keys(s.runs))
	s.mu.Unlock()
	var out []store.RunRecord
	for _, job := range jobs {
		for _, r := range s.history(job) {
			if r.OwnerTeam != q.Team || r.Due.Before(q.From) || !r.Due.Before(q.To) ||
				(q.After != nil && !q.After.After(r)) || (q.Keep != nil && !q.Keep(r)) {
				continue
			}
			out = append(out, r)
		}
	}
	slices.SortFunc(out, store.CompareRuns)
	return out[:min(len(out), q.Limit)], nil
}

// history returns a job's live records in ListRuns order, dropping expired
// ones.
func (s *Store) history(jobID string) []store.RunRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var recs []store.RunRecord
	for k, r := range s.runs[jobID] {
		if !now.Before(r.expires) {
			delete(s.runs[jobID], k)
			continue
		}
		recs = append(recs, r.rec)
	}
	slices.SortFunc(recs, store.CompareRuns)
	return recs
}

// ListJobs implements store.JobLister in job id order.
func (s *Store) ListJobs(_ context.Context, after string, limit int) (store.JobPage, error) {
	if limit < 1 {
		return store.JobPage{}, fmt.Errorf("list jobs: %w: limit %d: must be at least 1", store.ErrInvalid, limit)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.jobs))
	for id := range s.jobs {
		if id > after {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var page store.JobPage
	if len(ids) > limit {
		ids = ids[:limit]
		page.Next = ids[limit-1]
	}
	for _, id := range ids {
		job := s.jobs[id]
		if job.Deleted {
			continue
		}
		job.Spec = bytes.Clone(job.Spec)
		job.Hash = bytes.Clone(job.Hash)
		page.Jobs = append(page.Jobs, job)
	}
	return page, nil
}
