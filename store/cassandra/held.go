package cassandra

import (
	"context"
	"fmt"

	"github.com/gocql/gocql"

	"github.com/sundialhq/sundial/store"
)

// heldStatements are the CQL of the held entries (store.Held).
type heldStatements struct {
	insert, list, delete string
}

func (s *Store) heldCQL() heldStatements {
	ks := s.cfg.Keyspace
	return heldStatements{
		insert: fmt.Sprintf(`INSERT INTO %s.held_entries (job_id, due, kind, run_id, attempt, revision, payload) VALUES (?, ?, ?, ?, ?, ?, ?)`, ks),
		list:   fmt.Sprintf(`SELECT due, kind, run_id, attempt, revision, payload FROM %s.held_entries WHERE job_id = ?`, ks),
		delete: fmt.Sprintf(`DELETE FROM %s.held_entries WHERE job_id = ? AND due = ? AND kind = ? AND run_id = ?`, ks),
	}
}

// HoldDue implements store.Held. The entries of one job share a partition
// and are written as one unlogged batch.
func (s *Store) HoldDue(ctx context.Context, entries ...store.DueEntry) error {
	for i, e := range entries {
		if err := e.Validate(); err != nil {
			return fmt.Errorf("hold due entry %d: %w", i, err)
		}
	}
	q := s.heldCQL()
	byJob := map[string]*gocql.Batch{}
	var order []string
	for _, e := range entries {
		b, ok := byJob[e.JobID]
		if !ok {
			b = s.sess.NewBatch(gocql.UnloggedBatch).WithContext(ctx)
			byJob[e.JobID] = b
			order = append(order, e.JobID)
		}
		b.Entries = append(b.Entries, gocql.BatchEntry{Stmt: q.insert, Idempotent: true,
			Args: []any{e.JobID, ms(e.Due), string(e.Kind), e.RunID, e.Attempt, e.Revision, e.Payload}})
	}
	for _, job := range order {
		if err := s.sess.ExecuteBatch(byJob[job]); err != nil {
			return fmt.Errorf("hold %d entries of job %q: %w", len(byJob[job].Entries), job, err)
		}
	}
	return nil
}

// ListHeld implements store.Held.
func (s *Store) ListHeld(ctx context.Context, jobID string) ([]store.DueEntry, error) {
	it := s.idempotent(ctx, s.heldCQL().list, jobID).PageSize(s.cfg.PageSize).Iter()
	sc := it.Scanner()
	var out []store.DueEntry
	for sc.Next() {
		e := store.DueEntry{JobID: jobID}
		var kind string
		if err := sc.Scan(&e.Due, &kind, &e.RunID, &e.Attempt, &e.Revision, &e.Payload); err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("list held entries of job %q: %w", jobID, err)
		}
		decoded(&e, kind)
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("list held entries of job %q: %w", jobID, err)
	}
	return out, nil
}

// DeleteHeld implements store.Held.
func (s *Store) DeleteHeld(ctx context.Context, keys ...store.DueKey) error {
	q := s.heldCQL()
	for i, k := range keys {
		if err := k.Validate(); err != nil {
			return fmt.Errorf("delete held entry %d: %w", i, err)
		}
	}
	for _, k := range keys {
		if err := s.idempotent(ctx, q.delete, k.JobID, ms(k.Due), string(k.Kind), k.RunID).Exec(); err != nil {
			return fmt.Errorf("delete held entry %s of job %q: %w", k.RunID, k.JobID, err)
		}
	}
	return nil
}
