package cassandra

import (
	"context"
	"errors"
	"fmt"

	"github.com/gocql/gocql"

	"github.com/sundialhq/sundial/checkpoint"
)

// The checkpoints table (migration 9) keeps one row per run: its latest
// checkpoint and, while it is suspended, the run to dispatch on resume.
// Every write to a row is a lightweight transaction fenced by the row's
// fencing token (checkpoint's doc.go).

type checkpointStatements struct {
	insert, update, mark, insertMark, load, suspended, clear string
}

func (s *Store) checkpointCQL() checkpointStatements {
	ks := s.cfg.Keyspace
	return checkpointStatements{
		insert:     fmt.Sprintf(`INSERT INTO %s.checkpoints (run_id, seq, attempt, fencing_token, data, saved_at) VALUES (?, ?, ?, ?, ?, ?) IF NOT EXISTS`, ks),
		update:     fmt.Sprintf(`UPDATE %s.checkpoints SET seq = ?, attempt = ?, fencing_token = ?, data = ?, saved_at = ? WHERE run_id = ? IF fencing_token <= ?`, ks),
		insertMark: fmt.Sprintf(`INSERT INTO %s.checkpoints (run_id, seq, fencing_token, suspended, job_id, run) VALUES (?, 0, ?, true, ?, ?) IF NOT EXISTS`, ks),
		mark:       fmt.Sprintf(`UPDATE %s.checkpoints SET fencing_token = ?, suspended = true, job_id = ?, run = ? WHERE run_id = ? IF fencing_token <= ?`, ks),
		load:       fmt.Sprintf(`SELECT seq, attempt, fencing_token, data, saved_at FROM %s.checkpoints WHERE run_id = ?`, ks),
		suspended:  fmt.Sprintf(`SELECT suspended, job_id, run, fencing_token FROM %s.checkpoints WHERE run_id = ?`, ks),
		clear:      fmt.Sprintf(`UPDATE %s.checkpoints SET suspended = false WHERE run_id = ? IF suspended = true AND fencing_token = ?`, ks),
	}
}

// fencedWrite applies a row write fenced by token: insert when the row is
// absent, else update under the condition fencing_token <= token. It
// returns checkpoint.ErrStale when a newer token holds the row. A write
// whose outcome is unknown (a timeout) is tried again: both statements
// are safe to repeat under the same token.
func (s *Store) fencedWrite(ctx context.Context, what, runID string, token int64, insert, update func() *gocql.Query) error {
	b := contention()
	var lastErr error
	for range casAttempts {
		current := map[string]any{}
		applied, err := insert().MapScanCAS(current)
		if err == nil && !applied {
			if held, _ := current["fencing_token"].(int64); held > token {
				return fmt.Errorf("%s of run %s under fencing token %d (stored %d): %w", what, runID, token, held, checkpoint.ErrStale)
			}
			current = map[string]any{}
			applied, err = update().MapScanCAS(current)
			if err == nil && !applied {
				if held, ok := current["fencing_token"].(int64); ok && held > token {
					return fmt.Errorf("%s of run %s under fencing token %d (stored %d): %w", what, runID, token, held, checkpoint.ErrStale)
				}
			}
		}
		switch {
		case err == nil && applied:
			return nil
		case err != nil && !casUnknown(err):
			return fmt.Errorf("%s of run %s: %w", what, runID, err)
		}
		lastErr = err
		if err := waitContended(ctx, b); err != nil {
			return fmt.Errorf("%s of run %s: %w", what, runID, err)
		}
	}
	return fmt.Errorf("%s of run %s: contended %d times: %w", what, runID, casAttempts, errors.Join(lastErr, errContended))
}

var errContended = errors.New("lightweight transaction contended")

// SaveCheckpoint implements checkpoint.Store.
func (s *Store) SaveCheckpoint(ctx context.Context, c checkpoint.Checkpoint) error {
	if err := c.Validate(); err != nil {
		return err
	}
	q := s.checkpointCQL()
	at := ms(c.SavedAt)
	return s.fencedWrite(ctx, "save checkpoint", c.RunID, c.FencingToken,
		func() *gocql.Query {
			return s.query(ctx, q.insert, c.RunID, c.Seq, int(c.Attempt), c.FencingToken, c.Data, at)
		},
		func() *gocql.Query {
			return s.query(ctx, q.update, c.Seq, int(c.Attempt), c.FencingToken, c.Data, at, c.RunID, c.FencingToken)
		})
}

// LoadCheckpoint implements checkpoint.Store. It reads at serial
// consistency, so it sees every save that completed.
func (s *Store) LoadCheckpoint(ctx context.Context, runID string) (checkpoint.Checkpoint, bool, error) {
	c := checkpoint.Checkpoint{RunID: runID}
	var attempt int
	err := s.serialRead(ctx, s.checkpointCQL().load, runID).Scan(&c.Seq, &attempt, &c.FencingToken, &c.Data, &c.SavedAt)
	switch {
	case errors.Is(err, gocql.ErrNotFound):
		return checkpoint.Checkpoint{}, false, nil
	case err != nil:
		return checkpoint.Checkpoint{}, false, fmt.Errorf("load checkpoint of run %s: %w", runID, err)
	}
	if c.Seq == 0 { // a suspension marked before any save
		return checkpoint.Checkpoint{}, false, nil
	}
	c.Attempt = uint32(attempt)
	c.SavedAt = fromDB(c.SavedAt)
	return c, true, nil
}

// MarkSuspended implements checkpoint.Store.
func (s *Store) MarkSuspended(ctx context.Context, sp checkpoint.Suspension, token int64) error {
	if sp.RunID == "" || sp.JobID == "" || len(sp.Run) == 0 {
		return fmt.Errorf("mark run %q suspended: RunID, JobID and Run are required", sp.RunID)
	}
	q := s.checkpointCQL()
	return s.fencedWrite(ctx, "mark suspended", sp.RunID, token,
		func() *gocql.Query { return s.query(ctx, q.insertMark, sp.RunID, token, sp.JobID, sp.Run) },
		func() *gocql.Query { return s.query(ctx, q.mark, token, sp.JobID, sp.Run, sp.RunID, token) })
}

// Suspended implements checkpoint.Store.
func (s *Store) Suspended(ctx context.Context, runID string) (checkpoint.Suspension, bool, error) {
	sp := checkpoint.Suspension{RunID: runID}
	var suspended bool
	err := s.serialRead(ctx, s.checkpointCQL().suspended, runID).Scan(&suspended, &sp.JobID, &sp.Run, &sp.FencingToken)
	switch {
	case errors.Is(err, gocql.ErrNotFound):
		return checkpoint.Suspension{}, false, nil
	case err != nil:
		return checkpoint.Suspension{}, false, fmt.Errorf("read the suspension of run %s: %w", runID, err)
	}
	return sp, suspended, nil
}

// ClearSuspended implements checkpoint.Store.
func (s *Store) ClearSuspended(ctx context.Context, sp checkpoint.Suspension) error {
	applied, err := s.query(ctx, s.checkpointCQL().clear, sp.RunID, sp.FencingToken).MapScanCAS(map[string]any{})
	switch {
	case err != nil && casUnknown(err):
		cur, ok, rerr := s.Suspended(ctx, sp.RunID)
		if rerr != nil {
			return fmt.Errorf("clear the suspension of run %s: %w; reading it back: %w", sp.RunID, err, rerr)
		}
		if ok && cur.FencingToken == sp.FencingToken {
			return fmt.Errorf("clear the suspension of run %s: %w", sp.RunID, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("clear the suspension of run %s: %w", sp.RunID, err)
	case !applied:
		return fmt.Errorf("run %s: %w", sp.RunID, checkpoint.ErrNotSuspended)
	}
	return nil
}

var _ checkpoint.Store = (*Store)(nil)
