package audit

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"
)

// Memory is a Store in memory, for the embedded pipeline (`sundial dev`)
// and tests: the trail of one process, gone when it exits. Records never
// expire: the process does not live as long as a retention.
type Memory struct {
	mu   sync.Mutex
	recs map[string]Record
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty trail.
func NewMemory() *Memory {
	return &Memory{recs: map[string]Record{}}
}

// PutAudits implements Store: a record with an ID already kept replaces
// it.
func (m *Memory) PutAudits(_ context.Context, recs []Record, _ time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range recs {
		r.Changes = slices.Clone(r.Changes)
		m.recs[r.ID] = r
	}
	return nil
}

// ListAudit implements Store: the records of q's subject or team, newest
// first (by ID within a millisecond, as the Cassandra store orders them),
// at most q.Limit.
func (m *Memory) ListAudit(_ context.Context, q Query) ([]Record, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	var out []Record
	for _, r := range m.recs {
		if (q.Subject != "" && r.Subject != q.Subject) || (q.Team != "" && r.Team != q.Team) || r.At.Before(q.Since) {
			continue
		}
		r.Changes = slices.Clone(r.Changes)
		out = append(out, r)
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b Record) int {
		return cmp.Or(b.At.Truncate(time.Millisecond).Compare(a.At.Truncate(time.Millisecond)), cmp.Compare(b.ID, a.ID))
	})
	return out[:min(len(out), q.Limit)], nil
}
