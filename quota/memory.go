package quota

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"sync"
)

// Memory is an in-memory Store, for the embedded mode and tests.
type Memory struct {
	mu     sync.Mutex
	quotas map[string]Quota
	// owner is the index: job id -> its team (empty when deleted) and the
	// revision that set it.
	owner map[string]membership
}

type membership struct {
	team     string
	revision int64
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty Memory.
func NewMemory() *Memory {
	return &Memory{quotas: map[string]Quota{}, owner: map[string]membership{}}
}

// SetQuota implements Store.
func (m *Memory) SetQuota(_ context.Context, q Quota) error {
	if err := q.Validate(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.quotas[q.Team] = q
	return nil
}

// ListQuotas implements Store.
func (m *Memory) ListQuotas(context.Context) ([]Quota, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.SortedFunc(maps.Values(m.quotas), func(a, b Quota) int { return cmp.Compare(a.Team, b.Team) }), nil
}

// TrackTeamJob implements Store.
func (m *Memory) TrackTeamJob(_ context.Context, team, jobID string, revision int64) error {
	m.set(jobID, team, revision)
	return nil
}

// UntrackTeamJob implements Store.
func (m *Memory) UntrackTeamJob(_ context.Context, jobID string, revision int64) error {
	m.set(jobID, "", revision)
	return nil
}

// TrackTeamJobs implements Store.
func (m *Memory) TrackTeamJobs(_ context.Context, moves []TeamJob) error {
	for _, mv := range moves {
		m.set(mv.JobID, mv.Team, mv.Revision)
	}
	return nil
}

// set applies a membership unless the same or a newer revision set it
// already: a replayed record changes nothing.
func (m *Memory) set(jobID, team string, revision int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.owner[jobID]; ok && old.revision >= revision {
		return
	}
	m.owner[jobID] = membership{team: team, revision: revision}
}

// CountTeamJobs implements Store.
func (m *Memory) CountTeamJobs(_ context.Context, team string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, o := range m.owner {
		if o.team == team {
			n++
		}
	}
	return n, nil
}
