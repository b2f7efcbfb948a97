package cassandra

import (
	"context"
	"fmt"
	"time"

	"github.com/gocql/gocql"

	"github.com/sundialhq/sundial/store"
)

// RecordRun implements store.History. The row is written with the retention
// as its TTL and the record's UpdatedAt, in microseconds, as its write
// timestamp, so a replayed older event loses to the newer one already stored
// (last write wins by event time, not by arrival). The microseconds matter:
// a fast failure's running and failed states often fall in one millisecond,
// and on a timestamp tie Cassandra keeps the larger value cell by cell,
// which would keep "running" over "failed".
func (s *Store) RecordRun(ctx context.Context, rec store.RunRecord) error {
	if err := rec.Validate(); err != nil {
		return fmt.Errorf("record run: %w", err)
	}
	return s.recordRun(ctx, rec)
}

func (s *Store) recordRun(ctx context.Context, rec store.RunRecord) error {
	if err := s.idempotent(ctx, s.q.insertRun, s.runArgs(rec)...).Exec(); err != nil {
		return fmt.Errorf("record run %s attempt %d (%s): %w", rec.RunID, rec.Attempt, rec.State, err)
	}
	return nil
}

// maxRunBatch bounds the statements of one history batch below BatchSize:
// a run row with its error text is far larger than a due entry, and a batch
// over the server's batch_size_fail_threshold (50 KiB by default) is refused.
const maxRunBatch = 50

// RecordRuns implements store.History with writeByPartition: the records
// of one job share a partition and go in unlogged batches of at most
// min(BatchSize, 50) statements, WriteConcurrency batches at a time; when
// every node replicates every partition (batching.go), the records of
// several jobs share a batch of at most maxCrossBatchBytes. Each statement
// keeps its own write timestamp, so a batch orders the states of an attempt
// as RecordRun does.
func (s *Store) RecordRuns(ctx context.Context, recs []store.RunRecord) error {
	for i, r := range recs {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("record runs: record %d: %w", i, err)
		}
	}
	if len(recs) == 1 {
		return s.recordRun(ctx, recs[0])
	}
	stmts := make([]partStmt, len(recs))
	for i, r := range recs {
		stmts[i] = partStmt{part: r.JobID, stmt: s.q.insertRun, args: s.runArgs(r), bytes: runRecordBytes(r)}
	}
	if err := s.writeByPartition(ctx, stmts, min(s.cfg.BatchSize, maxRunBatch), maxCrossBatchBytes); err != nil {
		return fmt.Errorf("record %d runs (the first of job %q): %w", len(recs), recs[0].JobID, err)
	}
	return nil
}

// runRecordBytes estimates the bytes of a history record's statement.
func runRecordBytes(r store.RunRecord) int {
	n := len(r.JobID) + len(r.RunID) + len(r.Error)
	for _, l := range r.Log {
		n += len(l)
	}
	return n
}

// runArgs binds insertRun: the normalized record, the retention as TTL and
// UpdatedAt in microseconds, taken before Normalize truncates it, as the
// write timestamp.
func (s *Store) runArgs(rec store.RunRecord) []any {
	ts := rec.UpdatedAt.UnixMicro()
	rec = rec.Normalize()
	// Most records carry no log: leaving the column unset writes no
	// tombstone and keeps a log an earlier event of the attempt stored.
	var log any = gocql.UnsetValue
	if len(rec.Log) > 0 {
		log = rec.Log
	}
	return []any{
		rec.JobID, rec.Due, rec.RunID, rec.Attempt, rec.AttemptDue, string(rec.State),
		rec.Started, rec.Finished, rec.Duration.Milliseconds(), rec.Error, rec.UpdatedAt, log,
		int(s.cfg.RunRetention / time.Second), ts,
	}
}

// ListRuns implements store.History.
func (s *Store) ListRuns(ctx context.Context, jobID string, limit int) ([]store.RunRecord, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("list runs of %q: %w: limit %d: must be positive", jobID, store.ErrInvalid, limit)
	}
	recs, err := s.runs(ctx, jobID, limit)
	if err != nil {
		return nil, err
	}
	return s.withPlanned(ctx, jobID, recs, limit)
}

// withPlanned adds the attempt the job's definition planned
// (store.PlannedRecord) to its records: registering a job writes its row
// alone, no history record.
func (s *Store) withPlanned(ctx context.Context, jobID string, recs []store.RunRecord, limit int) ([]store.RunRecord, error) {
	j, err := s.getJobState(ctx, jobID)
	if err != nil {
		return nil, fmt.Errorf("list runs of %q: %w", jobID, err)
	}
	if j == nil {
		return recs, nil
	}
	if planned, ok := store.PlannedRecord(*j, s.cfg.Now(), s.cfg.RunRetention); ok {
		return store.WithPlanned(recs, planned, limit), nil
	}
	return recs, nil
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
	if recs, err = s.withPlanned(ctx, jobID, recs, 0); err != nil {
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
