package cassandra

// DAG definitions and DAG-run state (migration 3).
//
// dags rows are written like job rows: lightweight transactions conditional
// on the revision read. dag_runs rows are created with INSERT ... IF NOT
// EXISTS and changed only with UPDATE ... IF version = <version read>, so of
// two engines applying events to one run exactly one write applies and the
// other gets store.ErrVersionConflict. One partition per run keeps the Paxos
// rounds of different runs apart.
//
// Two tables index the runs for reading: dag_runs_by_dag (a DAG's runs,
// newest first) and dag_runs_active (the ids of unfinished runs). They are
// plain writes whose write timestamp (USING TIMESTAMP) is the run version
// they describe, so a late write of an old version never replaces a newer
// one, and an index delete at version v hides every index write up to v.
// The index rows that must never be missing are written before the
// transaction that needs them (a new run's rows, a run becoming active
// again); the rest after it, so a crash in between leaves at most an extra
// id in dag_runs_active (the reader finds the run inactive; any later update
// of the run removes the id) or a listing one version behind.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/gocql/gocql"

	"github.com/sundialhq/sundial/store"
)

// activeParts is the number of partitions of dag_runs_active.
const activeParts = 16

func activePart(id string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return int(h.Sum32() % activeParts)
}

func (s *Store) dq(format string) string { return fmt.Sprintf(format, s.cfg.Keyspace) }

func (s *Store) getDag(ctx context.Context, id string, serial bool) (*store.Dag, error) {
	stmt := s.dq(`SELECT spec, hash, revision, updated_at, deleted FROM %s.dags WHERE id = ?`)
	q := s.idempotent(ctx, stmt, id)
	if serial {
		q = s.serialRead(ctx, stmt, id)
	}
	d := store.Dag{ID: id}
	err := q.Scan(&d.Spec, &d.Hash, &d.Revision, &d.UpdatedAt, &d.Deleted)
	if errors.Is(err, gocql.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read dag %q: %w", id, err)
	}
	d.UpdatedAt = fromDB(d.UpdatedAt)
	return &d, nil
}

// GetDag implements store.Dags.
func (s *Store) GetDag(ctx context.Context, id string) (store.Dag, error) {
	d, err := s.getDag(ctx, id, false)
	if err != nil {
		return store.Dag{}, err
	}
	if d == nil {
		return store.Dag{}, fmt.Errorf("get dag %q: %w", id, store.ErrNotFound)
	}
	return *d, nil
}

// ListDags implements store.Dags with a scan of the dags table, which holds
// one small row per DAG.
func (s *Store) ListDags(ctx context.Context) ([]store.Dag, error) {
	iter := s.idempotent(ctx, s.dq(`SELECT id, spec, hash, revision, updated_at, deleted FROM %s.dags`)).
		PageSize(s.cfg.PageSize).Iter()
	var out []store.Dag
	var d store.Dag
	for iter.Scan(&d.ID, &d.Spec, &d.Hash, &d.Revision, &d.UpdatedAt, &d.Deleted) {
		if !d.Deleted {
			d.UpdatedAt = fromDB(d.UpdatedAt)
			out = append(out, d)
		}
		d = store.Dag{}
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("list dags: %w", err)
	}
	// The partitioner orders rows by token; callers expect ids in order.
	slices.SortFunc(out, func(a, b store.Dag) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// PutDag implements store.Dags.
func (s *Store) PutDag(ctx context.Context, d store.Dag) (store.Outcome, error) {
	if err := d.Validate(); err != nil {
		return 0, fmt.Errorf("put dag: %w", err)
	}
	d.Hash = store.SpecHash(d.Spec)
	d.UpdatedAt = ms(d.UpdatedAt)
	d.Deleted = false
	return s.changeDag(ctx, d.ID, func(stored *store.Dag) (store.Outcome, store.Dag) {
		return store.DecideDagUpsert(stored, d), d
	})
}

// DeleteDag implements store.Dags.
func (s *Store) DeleteDag(ctx context.Context, id string, revision int64, at time.Time) (store.Outcome, error) {
	if id == "" {
		return 0, fmt.Errorf("delete dag: %w: dag id: must not be empty", store.ErrInvalid)
	}
	tomb := store.Dag{ID: id, Revision: revision, UpdatedAt: ms(at), Deleted: true}
	return s.changeDag(ctx, id, func(stored *store.Dag) (store.Outcome, store.Dag) {
		return store.DecideDagDelete(stored, revision), tomb
	})
}

// changeDag is the read-decide-write loop of a dags row.
func (s *Store) changeDag(ctx context.Context, id string, decide func(*store.Dag) (store.Outcome, store.Dag)) (store.Outcome, error) {
	b := contention()
	for attempt := range casAttempts {
		stored, err := s.getDag(ctx, id, attempt > 0)
		if err != nil {
			return 0, err
		}
		outcome, row := decide(stored)
		switch outcome {
		case store.OutcomeCreated, store.OutcomeUpdated, store.OutcomeDeleted:
		default:
			return outcome, nil
		}
		var q *gocql.Query
		if stored == nil {
			q = s.query(ctx, s.dq(`INSERT INTO %s.dags (id, spec, hash, revision, updated_at, deleted) VALUES (?, ?, ?, ?, ?, ?) IF NOT EXISTS`),
				row.ID, row.Spec, row.Hash, row.Revision, row.UpdatedAt, row.Deleted)
		} else {
			q = s.query(ctx, s.dq(`UPDATE %s.dags SET spec = ?, hash = ?, revision = ?, updated_at = ?, deleted = ? WHERE id = ? IF revision = ?`),
				row.Spec, row.Hash, row.Revision, row.UpdatedAt, row.Deleted, row.ID, stored.Revision)
		}
		applied, err := q.MapScanCAS(map[string]any{})
		if err != nil {
			if !casUnknown(err) {
				return 0, fmt.Errorf("write dag %q revision %d: %w", id, row.Revision, err)
			}
			now, rerr := s.getDag(ctx, id, true)
			if rerr != nil {
				return 0, fmt.Errorf("write dag %q revision %d: %w; reading it back: %w", id, row.Revision, err, rerr)
			}
			applied = now != nil && now.Revision == row.Revision && now.Deleted == row.Deleted && bytes.Equal(now.Hash, row.Hash)
		}
		if applied {
			return outcome, nil
		}
		if err := waitContended(ctx, b); err != nil {
			return 0, fmt.Errorf("write dag %q: %w", id, err)
		}
	}
	return 0, fmt.Errorf("write dag %q: lost to concurrent writers %d times", id, casAttempts)
}

const dagRunColumns = `id, dag_id, due, origin, spec, state, status, summary, active, version, created_at, updated_at`

func scanDagRun(scan func(...any) bool) (store.DagRun, bool) {
	var r store.DagRun
	ok := scan(&r.ID, &r.DagID, &r.Due, &r.Origin, &r.Spec, &r.State, &r.Status, &r.Summary, &r.Active, &r.Version, &r.CreatedAt, &r.UpdatedAt)
	r.Due, r.CreatedAt, r.UpdatedAt = fromDB(r.Due), fromDB(r.CreatedAt), fromDB(r.UpdatedAt)
	return r, ok
}

func (s *Store) getDagRun(ctx context.Context, id string, serial bool) (*store.DagRun, error) {
	stmt := s.dq(`SELECT ` + dagRunColumns + ` FROM %s.dag_runs WHERE id = ?`)
	q := s.idempotent(ctx, stmt, id)
	if serial {
		q = s.serialRead(ctx, stmt, id)
	}
	var scanErr error
	r, _ := scanDagRun(func(dest ...any) bool { scanErr = q.Scan(dest...); return scanErr == nil })
	if errors.Is(scanErr, gocql.ErrNotFound) {
		return nil, nil
	}
	if scanErr != nil {
		return nil, fmt.Errorf("read dag run %q: %w", id, scanErr)
	}
	return &r, nil
}

// GetDagRun implements store.DagRuns. It reads at the store's consistency;
// a stale read costs the caller one lost update and a serial re-read.
func (s *Store) GetDagRun(ctx context.Context, id string) (store.DagRun, error) {
	r, err := s.getDagRun(ctx, id, false)
	if err != nil {
		return store.DagRun{}, err
	}
	if r == nil {
		return store.DagRun{}, fmt.Errorf("get dag run %q: %w", id, store.ErrNotFound)
	}
	return *r, nil
}

// writeIndex writes the listing row of run at its version, and its active
// row when active.
func (s *Store) writeIndex(ctx context.Context, r store.DagRun) error {
	err := s.idempotent(ctx, s.dq(`INSERT INTO %s.dag_runs_by_dag (dag_id, due, id, origin, status, summary, active, version, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?`),
		r.DagID, r.Due, r.ID, r.Origin, r.Status, r.Summary, r.Active, r.Version, r.CreatedAt, r.UpdatedAt, r.Version).Exec()
	if err != nil {
		return fmt.Errorf("index dag run %q: %w", r.ID, err)
	}
	if !r.Active {
		return nil
	}
	err = s.idempotent(ctx, s.dq(`INSERT INTO %s.dag_runs_active (part, id) VALUES (?, ?) USING TIMESTAMP ?`),
		activePart(r.ID), r.ID, r.Version).Exec()
	if err != nil {
		return fmt.Errorf("mark dag run %q active: %w", r.ID, err)
	}
	return nil
}

// unmarkActive deletes the active row of an inactive run at its version.
func (s *Store) unmarkActive(ctx context.Context, id string, version int64) error {
	err := s.idempotent(ctx, s.dq(`DELETE FROM %s.dag_runs_active USING TIMESTAMP ? WHERE part = ? AND id = ?`),
		version, activePart(id), id).Exec()
	if err != nil {
		return fmt.Errorf("unmark dag run %q active: %w", id, err)
	}
	return nil
}

// CreateDagRun implements store.DagRuns. The index rows go first, at
// version 1, so a created run is always listed; if the run existed they are
// older than its own index rows and change nothing.
func (s *Store) CreateDagRun(ctx context.Context, r store.DagRun) (store.DagRun, bool, error) {
	if err := r.Validate(); err != nil {
		return store.DagRun{}, false, fmt.Errorf("create dag run: %w", err)
	}
	r = r.Normalize()
	r.Version = 1
	if err := s.writeIndex(ctx, r); err != nil {
		return store.DagRun{}, false, fmt.Errorf("create dag run: %w", err)
	}
	applied, err := s.query(ctx, s.dq(`INSERT INTO %s.dag_runs (`+dagRunColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) IF NOT EXISTS`),
		r.ID, r.DagID, r.Due, r.Origin, r.Spec, r.State, r.Status, r.Summary, r.Active, r.Version, r.CreatedAt, r.UpdatedAt).
		MapScanCAS(map[string]any{})
	if err != nil && !casUnknown(err) {
		return store.DagRun{}, false, fmt.Errorf("create dag run %q: %w", r.ID, err)
	}
	if err == nil && applied {
		return r, true, nil
	}
	stored, rerr := s.getDagRun(ctx, r.ID, true)
	switch {
	case rerr != nil:
		return store.DagRun{}, false, fmt.Errorf("create dag run %q: reading it back: %w", r.ID, rerr)
	case stored == nil:
		return store.DagRun{}, false, fmt.Errorf("create dag run %q: %w; nothing was written", r.ID, err)
	}
	// After a timeout the run may be ours: same version 1, same state.
	mine := err != nil && stored.Version == 1 && bytes.Equal(stored.State, r.State) && stored.CreatedAt.Equal(r.CreatedAt)
	return *stored, mine, nil
}

// UpdateDagRun implements store.DagRuns: UPDATE ... IF version = ?. A run
// that becomes active again is marked active before the transaction; one
// that ends is unmarked after it.
func (s *Store) UpdateDagRun(ctx context.Context, r store.DagRun) (int64, error) {
	if err := r.Validate(); err != nil {
		return 0, fmt.Errorf("update dag run: %w", err)
	}
	r = r.Normalize()
	next := r.Version + 1
	if r.Active {
		err := s.idempotent(ctx, s.dq(`INSERT INTO %s.dag_runs_active (part, id) VALUES (?, ?) USING TIMESTAMP ?`),
			activePart(r.ID), r.ID, next).Exec()
		if err != nil {
			return 0, fmt.Errorf("update dag run %q: mark active: %w", r.ID, err)
		}
	}
	current := map[string]any{}
	applied, err := s.query(ctx, s.dq(`UPDATE %s.dag_runs SET state = ?, status = ?, summary = ?, active = ?, updated_at = ?, version = ? WHERE id = ? IF version = ?`),
		r.State, r.Status, r.Summary, r.Active, r.UpdatedAt, next, r.ID, r.Version).MapScanCAS(current)
	switch {
	case err != nil && !casUnknown(err):
		return 0, fmt.Errorf("update dag run %q: %w", r.ID, err)
	case err != nil:
		stored, rerr := s.getDagRun(ctx, r.ID, true)
		if rerr != nil {
			return 0, fmt.Errorf("update dag run %q: %w; reading it back: %w", r.ID, err, rerr)
		}
		if stored == nil {
			return 0, fmt.Errorf("update dag run %q: %w", r.ID, store.ErrNotFound)
		}
		if stored.Version != next || !bytes.Equal(stored.State, r.State) {
			return 0, fmt.Errorf("update dag run %q at version %d (now %d, after %w): %w", r.ID, r.Version, stored.Version, err, store.ErrVersionConflict)
		}
	case !applied:
		have, found := current["version"].(int64)
		if !found {
			return 0, fmt.Errorf("update dag run %q: %w", r.ID, store.ErrNotFound)
		}
		return 0, fmt.Errorf("update dag run %q at version %d (now %d): %w", r.ID, r.Version, have, store.ErrVersionConflict)
	}
	// Applied. The index follows; a failure here leaves the listing one
	// version behind, or an ended run's id listed as active, until the next
	// update. The run itself is written, so the caller must not retry.
	row := r
	row.Version = next
	if err := s.writeIndex(ctx, row); err == nil && !r.Active {
		_ = s.unmarkActive(ctx, r.ID, next)
	}
	return next, nil
}

// ListDagRuns implements store.DagRuns from the listing table.
func (s *Store) ListDagRuns(ctx context.Context, dagID string, limit int) ([]store.DagRun, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("list dag runs of %q: %w: limit %d: must be positive", dagID, store.ErrInvalid, limit)
	}
	iter := s.idempotent(ctx, s.dq(`SELECT id, due, origin, status, summary, active, version, created_at, updated_at FROM %s.dag_runs_by_dag WHERE dag_id = ? LIMIT ?`),
		dagID, limit).PageSize(min(limit, s.cfg.PageSize)).Iter()
	var out []store.DagRun
	var r store.DagRun
	for iter.Scan(&r.ID, &r.Due, &r.Origin, &r.Status, &r.Summary, &r.Active, &r.Version, &r.CreatedAt, &r.UpdatedAt) {
		r.DagID = dagID
		r.Due, r.CreatedAt, r.UpdatedAt = fromDB(r.Due), fromDB(r.CreatedAt), fromDB(r.UpdatedAt)
		out = append(out, r)
		r = store.DagRun{}
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("list dag runs of %q: %w", dagID, err)
	}
	return out, nil
}

// ListActiveDagRuns implements store.DagRuns from dag_runs_active.
func (s *Store) ListActiveDagRuns(ctx context.Context) ([]string, error) {
	var out []string
	for part := range activeParts {
		iter := s.idempotent(ctx, s.dq(`SELECT id FROM %s.dag_runs_active WHERE part = ?`), part).PageSize(s.cfg.PageSize).Iter()
		var id string
		for iter.Scan(&id) {
			out = append(out, id)
		}
		if err := iter.Close(); err != nil {
			return nil, fmt.Errorf("list active dag runs: %w", err)
		}
	}
	return out, nil
}
