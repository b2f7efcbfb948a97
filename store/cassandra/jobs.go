package cassandra

import (
	"context"
	"errors"
	"fmt"
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
	err := s.idempotent(ctx, s.q.selectJob, id).Scan(&j.Spec, &j.Hash, &j.Revision, &j.UpdatedAt, &j.Deleted, &j.NextDue)
	if errors.Is(err, gocql.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read job %q: %w", id, err)
	}
	j.UpdatedAt = fromDB(j.UpdatedAt)
	j.NextDue = fromDB(j.NextDue)
	return &j, nil
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
	err := s.idempotent(ctx, s.q.writeJob, j.ID, j.Spec, j.Hash, j.Revision, j.UpdatedAt, j.Deleted, j.NextDue, rowTimestamp(j.Revision)).Exec()
	if err != nil {
		return fmt.Errorf("write job %q revision %d: %w", j.ID, j.Revision, err)
	}
	return nil
}

// UpsertJob implements store.Jobs with no lightweight transaction: one read
// of the row, then the new first occurrence and its history record (at
// once), then the row at its revision's write timestamp, then the delete of
// the occurrence the replaced definition scheduled. A crash in between
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
	stored, err := s.getJob(ctx, job.ID)
	if err != nil {
		return 0, fmt.Errorf("upsert job: %w", err)
	}
	outcome := store.DecideUpsert(stored, job)
	if outcome != store.OutcomeCreated && outcome != store.OutcomeUpdated {
		return outcome, nil
	}
	if !job.NextDue.IsZero() {
		// The entry goes in before the row points at it. The history record
		// of the planned attempt needs no order: a replay writes it again.
		g, gctx := errgroup.WithContext(ctx)
		g.Go(func() error {
			if err := s.putDue(gctx, shards, []store.DueEntry{job.ScheduledEntry()}); err != nil {
				return fmt.Errorf("upsert job %q: schedule %s: %w", job.ID, job.NextDue.Format(time.RFC3339Nano), err)
			}
			return nil
		})
		g.Go(func() error {
			if err := s.recordRun(gctx, scheduledRecord(job)); err != nil {
				return fmt.Errorf("upsert job %q: %w", job.ID, err)
			}
			return nil
		})
		if err := g.Wait(); err != nil {
			return 0, err
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

// scheduledRecord is the history record of a definition's first occurrence.
func scheduledRecord(job store.Job) store.RunRecord {
	e := job.ScheduledEntry()
	return store.RunRecord{
		JobID: job.ID, RunID: e.RunID, Attempt: 1, Due: e.Due, AttemptDue: e.Due,
		State: store.StateScheduled, UpdatedAt: job.UpdatedAt,
	}
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
	stored, err := s.getJob(ctx, id)
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
