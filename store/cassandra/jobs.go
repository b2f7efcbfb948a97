package cassandra

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/gocql/gocql"
	"golang.org/x/sync/errgroup"

	"github.com/sundialhq/sundial/store"
)

// revisionEpoch is added to a revision to make the write timestamp of a job
// row. Every job row is written with USING TIMESTAMP revisionEpoch+revision,
// so Cassandra keeps the cells of the highest revision whatever order the
// writes arrive in, and a replayed or late definition can never overwrite a
// newer one. The epoch (2^60 µs, far beyond any wall clock) puts every such
// write above the wall-clock timestamps of rows written by lightweight
// transactions in earlier versions of the store, which would otherwise win
// over every new revision. Nothing else writes the jobs table.
const revisionEpoch = int64(1) << 60

// rowTimestamp is the write timestamp of the job row of revision rev.
func rowTimestamp(rev int64) int64 { return revisionEpoch + rev }

// getJob reads a job row; nil when there is none.
func (s *Store) getJob(ctx context.Context, id string) (*store.Job, error) {
	j := store.Job{ID: id}
	return s.scanJob(ctx, s.q.selectJob, &j, &j.Spec, &j.Hash, &j.Revision, &j.UpdatedAt, &j.Deleted, &j.NextDue)
}

// getJobState reads what deciding an upsert or delete needs of a job row
// (DecideUpsert, DecideDelete, Supersedes) and the attempt it planned
// (store.PlannedRecord): everything but its spec; nil when there is none. The
// definition's bytes are most of a row, and a decision reads a row for
// every definition it applies.
func (s *Store) getJobState(ctx context.Context, id string) (*store.Job, error) {
	j := store.Job{ID: id}
	return s.scanJob(ctx, s.q.selectJobState, &j, &j.Hash, &j.Revision, &j.UpdatedAt, &j.Deleted, &j.NextDue)
}

// scanJob reads the row of j.ID with stmt into dest (fields of j) and
// returns j with its times as stored; nil when there is no row.
func (s *Store) scanJob(ctx context.Context, stmt string, j *store.Job, dest ...any) (*store.Job, error) {
	err := s.idempotent(ctx, stmt, j.ID).Scan(dest...)
	if errors.Is(err, gocql.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read job %q: %w", j.ID, err)
	}
	j.UpdatedAt = fromDB(j.UpdatedAt)
	j.NextDue = fromDB(j.NextDue)
	return j, nil
}

// GetJob implements store.Jobs. It reads at the store's consistency: the
// dispatcher calls it for every entry it loads.
func (s *Store) GetJob(ctx context.Context, id string) (store.Job, error) {
	j, err := s.getJob(ctx, id)
	if err != nil {
		return store.Job{}, err
	}
	if j == nil {
		return store.Job{}, fmt.Errorf("get job %q: %w", id, store.ErrNotFound)
	}
	return *j, nil
}

// writeJob writes the whole job row at the write timestamp of its revision
// (rowTimestamp). The write is idempotent: writing it again, or after a
// newer revision, changes nothing.
func (s *Store) writeJob(ctx context.Context, j store.Job) error {
	err := s.idempotent(ctx, s.q.writeJob, s.jobArgs(j)...).Exec()
	if err != nil {
		return fmt.Errorf("write job %q revision %d: %w", j.ID, j.Revision, err)
	}
	return nil
}

func (s *Store) jobArgs(j store.Job) []any {
	return []any{j.ID, j.Spec, j.Hash, j.Revision, j.UpdatedAt, j.Deleted, j.NextDue, rowTimestamp(j.Revision)}
}

// UpsertJob implements store.Jobs with no lightweight transaction: one read
// of the row's state, then the new first occurrence, then the row at its
// revision's write timestamp, then the delete of the occurrence the
// replaced definition scheduled. A crash in between
// leaves at most a dead entry (see the store package doc), never a job whose
// row points at a missing one; a retry repeats the same idempotent writes.
func (s *Store) UpsertJob(ctx context.Context, job store.Job) (store.Outcome, error) {
	if err := job.Validate(); err != nil {
		return 0, fmt.Errorf("upsert job: %w", err)
	}
	job.Hash = store.SpecHash(job.Spec)
	job.UpdatedAt = ms(job.UpdatedAt)
	job.NextDue = ms(job.NextDue)
	job.Deleted = false
	shards, err := s.shardCount(ctx)
	if err != nil {
		return 0, fmt.Errorf("upsert job %q: %w", job.ID, err)
	}
	stored, err := s.getJobState(ctx, job.ID)
	if err != nil {
		return 0, fmt.Errorf("upsert job: %w", err)
	}
	outcome := store.DecideUpsert(stored, job)
	if outcome != store.OutcomeCreated && outcome != store.OutcomeUpdated {
		return outcome, nil
	}
	if !job.NextDue.IsZero() {
		// The entry goes in before the row points at it.
		if err := s.putDue(ctx, shards, []store.DueEntry{job.ScheduledEntry()}, 1); err != nil {
			return 0, fmt.Errorf("upsert job %q: schedule %s: %w", job.ID, job.NextDue.Format(time.RFC3339Nano), err)
		}
	}
	if err := s.writeJob(ctx, job); err != nil {
		return 0, fmt.Errorf("upsert job: %w", err)
	}
	if err := s.deleteSuperseded(ctx, shards, stored, job); err != nil {
		return 0, err
	}
	return outcome, nil
}

// DeleteJob implements store.Jobs: one read, the tombstone row at its
// revision's write timestamp, then the delete of the pending entry.
func (s *Store) DeleteJob(ctx context.Context, id string, revision int64, at time.Time) (store.Outcome, error) {
	if id == "" {
		return 0, fmt.Errorf("delete job: %w: job id: must not be empty", store.ErrInvalid)
	}
	shards, err := s.shardCount(ctx)
	if err != nil {
		return 0, fmt.Errorf("delete job %q: %w", id, err)
	}
	stored, err := s.getJobState(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("delete job: %w", err)
	}
	outcome := store.DecideDelete(stored, revision)
	if outcome != store.OutcomeDeleted {
		return outcome, nil
	}
	tomb := store.Job{ID: id, Revision: revision, UpdatedAt: ms(at), Deleted: true}
	if err := s.writeJob(ctx, tomb); err != nil {
		return 0, fmt.Errorf("delete job: %w", err)
	}
	if err := s.deleteSuperseded(ctx, shards, stored, tomb); err != nil {
		return 0, err
	}
	return outcome, nil
}

// deleteSuperseded deletes the entry the definition read before the write
// (stored) had scheduled, once row is written. A failure leaves that entry
// dead (its revision is no longer the job's), and a retry finds nothing to
// do.
func (s *Store) deleteSuperseded(ctx context.Context, shards int, stored *store.Job, row store.Job) error {
	if stored == nil || stored.Deleted || !store.Supersedes(stored.NextDue, row.NextDue) {
		return nil
	}
	old := stored.ScheduledEntry().Key()
	if err := s.deleteDue(ctx, shards, []store.DueKey{old}); err != nil {
		return fmt.Errorf("job %q stored at revision %d; deleting the superseded entry due %s: %w",
			row.ID, row.Revision, old.Due.Format(time.RFC3339Nano), err)
	}
	return nil
}

// readGroup is how many rows one read of readJobs asks for.
const readGroup = 32

// getJobs reads the state of the rows of ids (distinct, the columns of
// getJobState) with readJobs.
func (s *Store) getJobs(ctx context.Context, ids []string) (map[string]*store.Job, error) {
	return s.readJobs(ctx, ids, false)
}

// GetJobs implements store.Jobs with readJobs: whole rows, ids read
// readGroup at a time.
func (s *Store) GetJobs(ctx context.Context, ids []string) (map[string]store.Job, error) {
	rows, err := s.readJobs(ctx, slices.Compact(slices.Sorted(slices.Values(ids))), true)
	if err != nil {
		return nil, err
	}
	out := make(map[string]store.Job, len(rows))
	for id, j := range rows {
		out[id] = *j
	}
	return out, nil
}

// readJobs reads the rows of ids (distinct), with their specs or without
// (the columns of getJobState), in reads of readGroup ids each (WHERE id
// IN), all at once. The node reads the partitions of an IN one after the
// other, so a group takes longer than a single read, but all of a call's
// groups are in flight at once, and a request per group rather than per id
// costs less CPU on both sides (BenchmarkUpsertJobs: about a sixth less on
// the node, nearly half less in the client).
func (s *Store) readJobs(ctx context.Context, ids []string, spec bool) (map[string]*store.Job, error) {
	stmt := s.q.selectJobStates
	if spec {
		stmt = s.q.selectJobs
	}
	rows := make(map[string]*store.Job, len(ids))
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	for group := range slices.Chunk(ids, readGroup) {
		g.Go(func() error {
			it := s.idempotent(gctx, stmt, group).Iter()
			for {
				j := &store.Job{}
				dest := []any{&j.ID, &j.Hash, &j.Revision, &j.UpdatedAt, &j.Deleted, &j.NextDue}
				if spec {
					dest = []any{&j.ID, &j.Spec, &j.Hash, &j.Revision, &j.UpdatedAt, &j.Deleted, &j.NextDue}
				}
				if !it.Scan(dest...) {
					break
				}
				j.UpdatedAt = fromDB(j.UpdatedAt)
				j.NextDue = fromDB(j.NextDue)
				mu.Lock()
				rows[j.ID] = j
				mu.Unlock()
			}
			if err := it.Close(); err != nil {
				return fmt.Errorf("read %d jobs (%q to %q): %w", len(group), group[0], group[len(group)-1], err)
			}
			return nil
		})
	}
	return rows, g.Wait()
}

// UpsertJobs implements store.Jobs with the steps of UpsertJob taken for
// all jobs at once: the rows' states are read (getJobs), the first occurrences
// written grouped by partition (putDue, one mutation per partition and
// batch), then the rows in batches of many jobs (rowBatches), then the
// superseded entries deleted. The order of the steps per job is
// UpsertJob's, so a crash leaves what UpsertJob's would: entries without
// rows pointing at them, or rows written and their superseded entries not
// yet deleted, both of which a retry completes. A job id that appears
// twice makes the call apply the jobs one after the other.
func (s *Store) UpsertJobs(ctx context.Context, jobs []store.Job) ([]store.UpsertResult, error) {
	out := make([]store.UpsertResult, len(jobs))
	seen := make(map[string]bool, len(jobs))
	var ids []string
	for i := range jobs {
		job := &jobs[i]
		if err := job.Validate(); err != nil {
			out[i].Err = fmt.Errorf("upsert job: %w", err)
			continue
		}
		if seen[job.ID] {
			return s.upsertEach(ctx, jobs)
		}
		seen[job.ID] = true
		ids = append(ids, job.ID)
	}
	shards, err := s.shardCount(ctx)
	if err != nil {
		return nil, fmt.Errorf("upsert %d jobs: %w", len(jobs), err)
	}
	stored, err := s.getJobs(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("upsert %d jobs: %w", len(jobs), err)
	}

	var (
		changes []jobChange
		entries []store.DueEntry
	)
	for i, job := range jobs {
		if out[i].Err != nil {
			continue
		}
		job.Hash = store.SpecHash(job.Spec)
		job.UpdatedAt = ms(job.UpdatedAt)
		job.NextDue = ms(job.NextDue)
		job.Deleted = false
		out[i].Outcome = store.DecideUpsert(stored[job.ID], job)
		if o := out[i].Outcome; o != store.OutcomeCreated && o != store.OutcomeUpdated {
			continue
		}
		changes = append(changes, jobChange{stored: stored[job.ID], job: job})
		if !job.NextDue.IsZero() {
			entries = append(entries, job.ScheduledEntry())
		}
	}
	if len(changes) == 0 {
		return out, nil
	}

	// The entries go in before the rows point at them. Their batches go
	// all at once, as the rows do below, not WriteConcurrency at a time:
	// each batch waits for a commit-log sync on a node that syncs before
	// acknowledging, and the entries of a call spread over many partitions
	// (a shard each), so batches in turn made a call wait for several
	// syncs in a row. The caller bounds a call's size.
	if err := s.putDue(ctx, shards, entries, -1); err != nil {
		return nil, fmt.Errorf("upsert %d jobs: schedule %d first occurrences: %w", len(jobs), len(entries), err)
	}
	// The rows go in unlogged batches of many jobs (rowBatches) when every
	// node replicates every partition (batching.go), else one by one, all
	// in flight at once: a request costs the node far more than the write
	// of one small row, and the caller bounds a call's size. Each job's
	// superseded entry is deleted once its batch is written.
	rows, rctx := errgroup.WithContext(ctx)
	batches := rowBatches(changes)
	if !s.cross {
		batches = func(yield func([]jobChange) bool) {
			for i := range changes {
				if !yield(changes[i : i+1]) {
					return
				}
			}
		}
	}
	for batch := range batches {
		rows.Go(func() error {
			if err := s.writeJobs(rctx, batch); err != nil {
				return err
			}
			for _, c := range batch {
				if err := s.deleteSuperseded(rctx, shards, c.stored, c.job); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := rows.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// jobChange is a definition UpsertJobs writes and the row state it read.
type jobChange struct {
	stored *store.Job
	job    store.Job
}

// maxRowBatchBytes bounds the size of a batch of job rows as the node
// counts it (rowBytes). A batch of rows of several jobs spans partitions,
// and Cassandra refuses one larger than batch_size_fail_threshold (50 KiB
// by default) and logs a warning for one larger than
// batch_size_warn_threshold (5 KiB); half the failing size leaves room
// for an estimate that runs short.
const maxRowBatchBytes = 24 << 10

// rowBytes estimates what Cassandra counts of a job row in a batch's size:
// the values of its cells and, per cell, their metadata (timestamp,
// lengths).
func rowBytes(j store.Job) int { return len(j.ID) + len(j.Spec) + len(j.Hash) + 192 }

// rowBatches cuts changes into batches whose rows together stay within
// maxRowBatchBytes; a row larger than that goes alone (a batch of one
// partition is not subject to the threshold).
func rowBatches(changes []jobChange) iter.Seq[[]jobChange] {
	return func(yield func([]jobChange) bool) {
		start, bytes := 0, 0
		for i, c := range changes {
			n := rowBytes(c.job)
			if i > start && bytes+n > maxRowBatchBytes {
				if !yield(changes[start:i]) {
					return
				}
				start, bytes = i, 0
			}
			bytes += n
		}
		if start < len(changes) {
			yield(changes[start:])
		}
	}
}

// writeJobs writes the rows of batch in one unlogged batch, each at its
// revision's write timestamp (writeJob). The rows are of different jobs,
// so the batch spans partitions and is not atomic: on error some may be
// written, which is what a crash during writes one by one leaves, and a
// retry writes them again.
func (s *Store) writeJobs(ctx context.Context, batch []jobChange) error {
	if len(batch) == 1 {
		return s.writeJob(ctx, batch[0].job)
	}
	b := s.sess.NewBatch(gocql.UnloggedBatch).WithContext(ctx)
	for _, c := range batch {
		b.Entries = append(b.Entries, gocql.BatchEntry{Stmt: s.q.writeJob, Args: s.jobArgs(c.job), Idempotent: true})
	}
	if err := s.sess.ExecuteBatch(b); err != nil {
		return fmt.Errorf("write %d jobs (%q to %q): %w", len(batch), batch[0].job.ID, batch[len(batch)-1].job.ID, err)
	}
	return nil
}

// upsertEach applies jobs one after the other.
func (s *Store) upsertEach(ctx context.Context, jobs []store.Job) ([]store.UpsertResult, error) {
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

// ListJobs implements store.JobLister in token order of the job ids: one
// read of limit+1 rows, the extra one telling whether another page follows.
func (s *Store) ListJobs(ctx context.Context, after string, limit int) (store.JobPage, error) {
	if limit < 1 {
		return store.JobPage{}, fmt.Errorf("list jobs: %w: limit %d: must be at least 1", store.ErrInvalid, limit)
	}
	q := s.idempotent(ctx, s.q.listJobsFirst, limit+1)
	if after != "" {
		q = s.idempotent(ctx, s.q.listJobsAfter, after, limit+1)
	}
	iter := q.PageSize(min(limit+1, s.cfg.PageSize)).Iter()
	var (
		page    store.JobPage
		scanned int
		last    string
		j       store.Job
	)
	for iter.Scan(&j.ID, &j.Spec, &j.Hash, &j.Revision, &j.UpdatedAt, &j.Deleted, &j.NextDue) {
		scanned++
		if scanned > limit {
			page.Next = last
			break
		}
		last = j.ID
		if !j.Deleted {
			j.UpdatedAt = fromDB(j.UpdatedAt)
			j.NextDue = fromDB(j.NextDue)
			page.Jobs = append(page.Jobs, j)
		}
		j = store.Job{}
	}
	if err := iter.Close(); err != nil {
		return store.JobPage{}, fmt.Errorf("list jobs after %q: %w", after, err)
	}
	return page, nil
}
