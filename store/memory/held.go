package memory

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/sundialhq/sundial/store"
)

// HoldDue implements store.Held.
func (s *Store) HoldDue(_ context.Context, entries ...store.DueEntry) error {
	for i, e := range entries {
		if err := e.Validate(); err != nil {
			return fmt.Errorf("hold due entry %d: %w", i, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil {
		s.held = map[string]map[entryKey]store.DueEntry{}
	}
	for _, e := range entries {
		e.Due = store.Truncate(e.Due)
		e.Payload = bytes.Clone(e.Payload)
		if len(e.Payload) == 0 {
			e.Payload = nil // as Cassandra reads an empty blob
		}
		job := s.held[e.JobID]
		if job == nil {
			job = map[entryKey]store.DueEntry{}
			s.held[e.JobID] = job
		}
		job[keyOf(e.Key())] = e
	}
	return nil
}

// ListHeld implements store.Held.
func (s *Store) ListHeld(_ context.Context, jobID string) ([]store.DueEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Collect(maps.Values(s.held[jobID]))
	slices.SortFunc(out, func(a, b store.DueEntry) int {
		return cmp.Or(a.Due.Compare(b.Due), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.RunID, b.RunID))
	})
	for i := range out {
		out[i].Payload = bytes.Clone(out[i].Payload)
	}
	return out, nil
}

// DeleteHeld implements store.Held.
func (s *Store) DeleteHeld(_ context.Context, keys ...store.DueKey) error {
	for i, k := range keys {
		if err := k.Validate(); err != nil {
			return fmt.Errorf("delete held entry %d: %w", i, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		job := s.held[k.JobID]
		delete(job, keyOf(k))
		if len(job) == 0 {
			delete(s.held, k.JobID)
		}
	}
	return nil
}
