package memory

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sundialhq/sundial/store"
)

// PutDag implements store.Dags.
func (s *Store) PutDag(_ context.Context, d store.Dag) (store.Outcome, error) {
	if err := d.Validate(); err != nil {
		return 0, fmt.Errorf("put dag: %w", err)
	}
	d.Spec = bytes.Clone(d.Spec)
	d.Hash = store.SpecHash(d.Spec)
	d.UpdatedAt = store.Truncate(d.UpdatedAt)
	d.Deleted = false
	s.mu.Lock()
	defer s.mu.Unlock()
	var stored *store.Dag
	if old, ok := s.dags[d.ID]; ok {
		stored = &old
	}
	outcome := store.DecideDagUpsert(stored, d)
	if outcome == store.OutcomeCreated || outcome == store.OutcomeUpdated {
		s.dags[d.ID] = d
	}
	return outcome, nil
}

// DeleteDag implements store.Dags.
func (s *Store) DeleteDag(_ context.Context, id string, revision int64, at time.Time) (store.Outcome, error) {
	if id == "" {
		return 0, fmt.Errorf("delete dag: %w: dag id: must not be empty", store.ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var stored *store.Dag
	if old, ok := s.dags[id]; ok {
		stored = &old
	}
	outcome := store.DecideDagDelete(stored, revision)
	if outcome == store.OutcomeDeleted {
		s.dags[id] = store.Dag{ID: id, Revision: revision, UpdatedAt: store.Truncate(at), Deleted: true}
	}
	return outcome, nil
}

// GetDag implements store.Dags.
func (s *Store) GetDag(_ context.Context, id string) (store.Dag, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.dags[id]
	if !ok {
		return store.Dag{}, fmt.Errorf("get dag %q: %w", id, store.ErrNotFound)
	}
	return cloneDag(d), nil
}

// ListDags implements store.Dags.
func (s *Store) ListDags(context.Context) ([]store.Dag, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]store.Dag, 0, len(s.dags))
	for _, d := range s.dags {
		if !d.Deleted {
			out = append(out, cloneDag(d))
		}
	}
	slices.SortFunc(out, func(a, b store.Dag) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

func cloneDag(d store.Dag) store.Dag {
	d.Spec = bytes.Clone(d.Spec)
	d.Hash = bytes.Clone(d.Hash)
	return d
}

func cloneDagRun(r store.DagRun) store.DagRun {
	r.Spec = bytes.Clone(r.Spec)
	r.State = bytes.Clone(r.State)
	return r
}

// CreateDagRun implements store.DagRuns.
func (s *Store) CreateDagRun(_ context.Context, r store.DagRun) (store.DagRun, bool, error) {
	if err := r.Validate(); err != nil {
		return store.DagRun{}, false, fmt.Errorf("create dag run: %w", err)
	}
	r = cloneDagRun(r.Normalize())
	r.Version = 1
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.dagRuns[r.ID]; ok {
		return cloneDagRun(old), false, nil
	}
	s.dagRuns[r.ID] = r
	return cloneDagRun(r), true, nil
}

// UpdateDagRun implements store.DagRuns.
func (s *Store) UpdateDagRun(_ context.Context, r store.DagRun) (int64, error) {
	if err := r.Validate(); err != nil {
		return 0, fmt.Errorf("update dag run: %w", err)
	}
	r = r.Normalize()
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.dagRuns[r.ID]
	if !ok {
		return 0, fmt.Errorf("update dag run %q: %w", r.ID, store.ErrNotFound)
	}
	if old.Version != r.Version {
		return 0, fmt.Errorf("update dag run %q at version %d (now %d): %w", r.ID, r.Version, old.Version, store.ErrVersionConflict)
	}
	old.State = bytes.Clone(r.State)
	old.Status = r.Status
	old.Summary = r.Summary
	old.Active = r.Active
	old.UpdatedAt = r.UpdatedAt
	old.Version++
	s.dagRuns[r.ID] = old
	return old.Version, nil
}

// GetDagRun implements store.DagRuns.
func (s *Store) GetDagRun(_ context.Context, id string) (store.DagRun, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.dagRuns[id]
	if !ok {
		return store.DagRun{}, fmt.Errorf("get dag run %q: %w", id, store.ErrNotFound)
	}
	return cloneDagRun(r), nil
}

// ListDagRuns implements store.DagRuns.
func (s *Store) ListDagRuns(_ context.Context, dagID string, limit int) ([]store.DagRun, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("list dag runs of %q: %w: limit %d: must be positive", dagID, store.ErrInvalid, limit)
	}
	s.mu.Lock()
	var out []store.DagRun
	for _, r := range s.dagRuns {
		if r.DagID == dagID {
			r.Spec, r.State = nil, nil
			out = append(out, r)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b store.DagRun) int {
		return cmp.Or(b.Due.Compare(a.Due), cmp.Compare(a.ID, b.ID))
	})
	return out[:min(limit, len(out))], nil
}

// ListActiveDagRuns implements store.DagRuns.
func (s *Store) ListActiveDagRuns(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id, r := range s.dagRuns {
		if r.Active {
			out = append(out, id)
		}
	}
	return out, nil
}
