package cassandra

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gocql/gocql"

	"github.com/sundialhq/sundial/store"
)

// getJob reads a job row; nil when there is none. A serial read is used
// after a lost or unknown transaction, to see its outcome.
func (s *Store) getJob(ctx context.Context, id string, serial bool) (*store.Job, error) {
	q := s.idempotent(ctx, s.q.selectJob, id)
	if serial {
		q = s.serialRead(ctx, s.q.selectJob, id)
	}
	j := store.Job{ID: id}
	err := q.Scan(&j.Spec, &j.Hash, &j.Revision, &j.UpdatedAt, &j.Deleted, &j.NextDue)
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

// GetJob implements store.Jobs. It reads at the store's consistency, not
// serially: the dispatcher calls it for every entry it loads.
func (s *Store) GetJob(ctx context.Context, id string) (store.Job, error) {
	j, err := s.getJob(ctx, id, false)
	if err != nil {
		return store.Job{}, err
	}
	if j == nil {
		return store.Job{}, fmt.Errorf("get job %q: %w", id, store.ErrNotFound)
	}
	return *j, nil
}

// writeJob writes the job row conditionally on the row read (none, or its
// revision). It reports whether the write applied; a timeout is resolved by
// reading the row back.
func (s *Store) writeJob(ctx context.Context, stored *store.Job, j store.Job) (bool, error) {
	var q *gocql.Query
	if stored == nil {
		q = s.query(ctx, s.q.insertJob, j.ID, j.Spec, j.Hash, j.Revision, j.UpdatedAt, j.Deleted, j.NextDue)
	} else {
		q = s.query(ctx, s.q.updateJob, j.Spec, j.Hash, j.Revision, j.UpdatedAt, j.Deleted, j.NextDue, j.ID, stored.Revision)
	}
	applied, err := q.MapScanCAS(map[string]any{})
	if err == nil {
		return applied, nil
	}
	if !casUnknown(err) {
		return false, fmt.Errorf("write job %q revision %d: %w", j.ID, j.Revision, err)
	}
	now, rerr := s.getJob(ctx, j.ID, true)
	if rerr != nil {
		return false, fmt.Errorf("write job %q revision %d: %w; reading it back: %w", j.ID, j.Revision, err, rerr)
	}
	return now != nil && now.Revision == j.Revision && now.Deleted == j.Deleted && bytes.Equal(now.Hash, j.Hash), nil
}

// UpsertJob implements store.Jobs: write the new first occurrence, then the
// job row (a lightweight transaction on the revision read), then delete the
// occurrence the previous definition scheduled. A crash in between leaves at
// most a dead entry (see the store package doc), never a missing one.
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
	decide := func(stored *store.Job) (store.Outcome, store.Job, error) {
		outcome := store.DecideUpsert(stored, job)
		if outcome != store.OutcomeCreated && outcome != store.OutcomeUpdated {
			return outcome, job, nil
		}
		// The new occurrence goes in before the row points at it: a crash
		// in between leaves a dead entry, never a job with nothing due.
		if !job.NextDue.IsZero() {
			if err := s.putDue(ctx, shards, []store.DueEntry{job.ScheduledEntry()}); err != nil {
				return 0, job, fmt.Errorf("upsert job %q: schedule %s: %w", job.ID, job.NextDue.Format(time.RFC3339Nano), err)
			}
		}
		return outcome, job, nil
	}
	written := func(row store.Job) error {
		if row.NextDue.IsZero() {
			return nil
		}
		if err := s.recordRun(ctx, scheduledRecord(row)); err != nil {
			return fmt.Errorf("upsert job %q: %w", row.ID, err)
		}
		return nil
	}
	return s.changeJob(ctx, job.ID, shards, decide, written)
}

// scheduledRecord is the history record of a definition's first occurrence.
func scheduledRecord(job store.Job) store.RunRecord {
	e := job.ScheduledEntry()
	return store.RunRecord{
		JobID: job.ID, RunID: e.RunID, Attempt: 1, Due: e.Due, AttemptDue: e.Due,
		State: store.StateScheduled, UpdatedAt: job.UpdatedAt,
	}
}

// DeleteJob implements store.Jobs.
func (s *Store) DeleteJob(ctx context.Context, id string, revision int64, at time.Time) (store.Outcome, error) {
	if id == "" {
		return 0, fmt.Errorf("delete job: %w: job id: must not be empty", store.ErrInvalid)
	}
	shards, err := s.shardCount(ctx)
	if err != nil {
		return 0, fmt.Errorf("delete job %q: %w", id, err)
	}
	tomb := store.Job{ID: id, Revision: revision, UpdatedAt: ms(at), Deleted: true}
	decide := func(stored *store.Job) (store.Outcome, store.Job, error) {
		return store.DecideDelete(stored, revision), tomb, nil
	}
	return s.changeJob(ctx, id, shards, decide, nil)
}

// changeJob runs the read-decide-write loop of a job row. decide sees the
// stored row and returns the outcome and the row to write (written only for
// OutcomeCreated, OutcomeUpdated and OutcomeDeleted). Once the row is
// written, written (if not nil) is called with it, and the entry the
// replaced definition scheduled is deleted.
func (s *Store) changeJob(ctx context.Context, id string, shards int,
	decide func(*store.Job) (store.Outcome, store.Job, error), written func(store.Job) error,
) (store.Outcome, error) {
	b := contention()
	for attempt := range casAttempts {
		stored, err := s.getJob(ctx, id, attempt > 0)
		if err != nil {
			return 0, err
		}
		outcome, row, err := decide(stored)
		if err != nil {
			return 0, err
		}
		switch outcome {
		case store.OutcomeCreated, store.OutcomeUpdated, store.OutcomeDeleted:
		default:
			return outcome, nil
		}
		applied, err := s.writeJob(ctx, stored, row)
		if err != nil {
			return 0, err
		}
		if !applied {
			if err := waitContended(ctx, b); err != nil {
				return 0, fmt.Errorf("write job %q: %w", id, err)
			}
			continue
		}
		if written != nil {
			if err := written(row); err != nil {
				return 0, err
			}
		}
		if stored != nil && !stored.Deleted && store.Supersedes(stored.NextDue, row.NextDue) {
			old := stored.ScheduledEntry().Key()
			if err := s.deleteDue(ctx, shards, []store.DueKey{old}); err != nil {
				// The row is written; the old entry is dead (its revision
				// is no longer the job's) and a retry finds nothing to do.
				return 0, fmt.Errorf("job %q stored at revision %d; deleting the superseded entry due %s: %w",
					id, row.Revision, old.Due.Format(time.RFC3339Nano), err)
			}
		}
		return outcome, nil
	}
	return 0, fmt.Errorf("write job %q: lost to concurrent writers %d times", id, casAttempts)
}
