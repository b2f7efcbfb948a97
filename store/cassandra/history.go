package cassandra

import (
	"context"
	"fmt"
	"time"

	"github.com/gocql/gocql"

	"github.com/sundialhq/sundial/store"
)

// RecordRun implements store.History. The row is written with the retention
// as its TTL and the record's UpdatedAt as its write timestamp, so a replayed
// older event loses to the newer one already stored (last write wins by
// event time, not by arrival).
func (s *Store) RecordRun(ctx context.Context, rec store.RunRecord) error {
	if err := rec.Validate(); err != nil {
		return fmt.Errorf("record run: %w", err)
	}
	return s.recordRun(ctx, rec)
}

func (s *Store) recordRun(ctx context.Context, rec store.RunRecord) error {
	rec = rec.Normalize()
	ttl := int(s.cfg.RunRetention / time.Second)
	// Most records carry no log: leaving the column unset writes no
	// tombstone and keeps a log an earlier event of the attempt stored.
	var log any = gocql.UnsetValue
	if len(rec.Log) > 0 {
		log = rec.Log
	}
	err := s.idempotent(ctx, s.q.insertRun,
		rec.JobID, rec.Due, rec.RunID, rec.Attempt, rec.AttemptDue, string(rec.State),
		rec.Started, rec.Finished, rec.Duration.Milliseconds(), rec.Error, rec.UpdatedAt, log,
		ttl, rec.UpdatedAt.UnixMicro(),
	).Exec()
	if err != nil {
		return fmt.Errorf("record run %s attempt %d (%s): %w", rec.RunID, rec.Attempt, rec.State, err)
	}
	return nil
}

// ListRuns implements store.History.
func (s *Store) ListRuns(ctx context.Context, jobID string, limit int) ([]store.RunRecord, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("list runs of %q: %w: limit %d: must be positive", jobID, store.ErrInvalid, limit)
	}
	return s.runs(ctx, jobID, limit)
}

// JobSummary implements store.History over every retained record of the job.
func (s *Store) JobSummary(ctx context.Context, jobID string) (store.Summary, error) {
	if jobID == "" {
		return store.Summary{}, fmt.Errorf("job summary: %w: job id: must not be empty", store.ErrInvalid)
	}
	recs, err := s.runs(ctx, jobID, 0)
	if err != nil {
		return store.Summary{}, err
	}
	return store.Summarize(jobID, recs), nil
}

// runs reads a job's records in clustering order; limit 0 reads them all,
// page by page.
func (s *Store) runs(ctx context.Context, jobID string, limit int) ([]store.RunRecord, error) {
	stmt := s.q.selectRuns
	pageSize := s.cfg.PageSize
	if limit > 0 {
		stmt += fmt.Sprintf(" LIMIT %d", limit)
		pageSize = min(pageSize, limit)
	}
	it := s.idempotent(ctx, stmt, jobID).PageSize(pageSize).Iter()
	sc := it.Scanner()
	var out []store.RunRecord
	for sc.Next() {
		var r store.RunRecord
		var state string
		var durationMS int64
		if err := sc.Scan(&r.JobID, &r.Due, &r.RunID, &r.Attempt, &r.AttemptDue, &state,
			&r.Started, &r.Finished, &durationMS, &r.Error, &r.UpdatedAt, &r.Log); err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("list runs of %q: %w", jobID, err)
		}
		r.State = store.RunState(state)
		r.Duration = time.Duration(durationMS) * time.Millisecond
		r.Due, r.AttemptDue = fromDB(r.Due), fromDB(r.AttemptDue)
		r.Started, r.Finished, r.UpdatedAt = fromDB(r.Started), fromDB(r.Finished), fromDB(r.UpdatedAt)
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("list runs of %q: %w", jobID, err)
	}
	return out, nil
}
