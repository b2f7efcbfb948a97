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
	if rec.OwnerTeam == "" {
		return nil
	}
	if err := s.idempotent(ctx, s.q.insertTeamRun, s.teamRunArgs(rec)...).Exec(); err != nil {
		return fmt.Errorf("index run %s attempt %d (%s) of team %s: %w", rec.RunID, rec.Attempt, rec.State, rec.OwnerTeam, err)
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
	stmts := make([]partStmt, 0, len(recs))
	for _, r := range recs {
		stmts = append(stmts, partStmt{part: r.JobID, stmt: s.q.insertRun, args: s.runArgs(r), bytes: runRecordBytes(r)})
	}
	// The index rows go after every runs row: a crash in between leaves a
	// run unlisted by team until its next event, never listed without its
	// runs row.
	for _, r := range recs {
		if r.OwnerTeam != "" {
			part := "team/" + r.OwnerTeam + "/" + store.RunBucket(r.Due).Format(time.RFC3339)
			stmts = append(stmts, partStmt{part: part, stmt: s.q.insertTeamRun, args: s.teamRunArgs(r), bytes: runRecordBytes(r)})
		}
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
		unsetEmpty(rec.OwnerTeam), unsetEmpty(rec.WaitReason), unsetZero(rec.Dispatched), unsetZero(rec.Received), unsetZero(rec.Leased),
		int(s.cfg.RunRetention / time.Second), ts,
	}
}

// teamRunArgs binds insertTeamRun as runArgs binds insertRun.
func (s *Store) teamRunArgs(rec store.RunRecord) []any {
	ts := rec.UpdatedAt.UnixMicro()
	rec = rec.Normalize()
	return []any{
		rec.OwnerTeam, store.RunBucket(rec.Due), rec.Due, rec.RunID, rec.Attempt, rec.JobID, rec.AttemptDue, string(rec.State),
		rec.Started, rec.Finished, rec.Duration.Milliseconds(), rec.Error, rec.UpdatedAt,
		unsetEmpty(rec.WaitReason), unsetZero(rec.Dispatched), unsetZero(rec.Received), unsetZero(rec.Leased),
		int(s.cfg.RunRetention / time.Second), ts,
	}
}

// unsetEmpty leaves an empty text column unset, so a newer record without
// it keeps what an earlier one stored, and writes no tombstone.
func unsetEmpty(v string) any {
	if v == "" {
		return gocql.UnsetValue
	}
	return v
}

// unsetZero is unsetEmpty for a time.
func unsetZero(t time.Time) any {
	if t.IsZero() {
		return gocql.UnsetValue
	}
	return t
}

// ListTeamRuns implements store.RunIndex: it reads the team's hour
// partitions of runs_by_time from the newest in the window back, until it
// holds q.Limit records that q.Keep accepts.
func (s *Store) ListTeamRuns(ctx context.Context, q store.TeamRunsQuery) ([]store.RunRecord, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("list team runs: %w", err)
	}
	// The newest due time listed: below To, and at or before After.
	upper := q.To.Add(-time.Millisecond)
	if q.After != nil && q.After.Due.Before(upper) {
		upper = q.After.Due
	}
	var out []store.RunRecord
	for bucket := store.RunBucket(upper); !bucket.Before(store.RunBucket(q.From)); bucket = bucket.Add(-time.Hour) {
		it := s.idempotent(ctx, s.q.selectTeamRuns, q.Team, bucket, q.From, upper).PageSize(s.cfg.PageSize).Iter()
		sc := it.Scanner()
		for sc.Next() {
			r, err := scanRun(sc, false)
			if err != nil {
				_ = it.Close()
				return nil, fmt.Errorf("list runs of team %q: %w", q.Team, err)
			}
			if (q.After != nil && !q.After.After(r)) || (q.Keep != nil && !q.Keep(r)) {
				continue
			}
			out = append(out, r)
			if len(out) == q.Limit {
				_ = it.Close()
				return out, nil
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("list runs of team %q: %w", q.Team, err)
		}
	}
	return out, nil
}

// scanRun reads one row of selectRuns (withLog) or selectTeamRuns.
func scanRun(sc gocql.Scanner, withLog bool) (store.RunRecord, error) {
	var r store.RunRecord
	var state string
	var durationMS int64
	var owner, reason *string
	dest := []any{&r.JobID, &r.Due, &r.RunID, &r.Attempt, &r.AttemptDue, &state,
		&r.Started, &r.Finished, &durationMS, &r.Error, &r.UpdatedAt}
	if withLog {
		dest = append(dest, &r.Log)
	}
	dest = append(dest, &owner, &reason, &r.Dispatched, &r.Received, &r.Leased)
	if err := sc.Scan(dest...); err != nil {
		return r, err
	}
	if owner != nil {
		r.OwnerTeam = *owner
	}
	if reason != nil {
		r.WaitReason = *reason
	}
	r.State = store.RunState(state)
	r.Duration = time.Duration(durationMS) * time.Millisecond
	r.Due, r.AttemptDue = fromDB(r.Due), fromDB(r.AttemptDue)
	r.Started, r.Finished, r.UpdatedAt = fromDB(r.Started), fromDB(r.Finished), fromDB(r.UpdatedAt)
	r.Dispatched, r.Received, r.Leased = fromDB(r.Dispatched), fromDB(r.Received), fromDB(r.Leased)
	return r, nil
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
		r, err := scanRun(sc, true)
		if err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("list runs of %q: %w", jobID, err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("list runs of %q: %w", jobID, err)
	}
	return out, nil
}
