package auth

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// MemoryStore is a TokenStore held in memory, for the embedded mode and
// tests. It is safe for concurrent use; its zero value is not: use
// NewMemoryStore.
type MemoryStore struct {
	mu     sync.Mutex
	teams  map[string]Team
	tokens map[string]Token
}

var _ TokenStore = (*MemoryStore)(nil)

// NewMemoryStore returns an empty store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{teams: map[string]Team{}, tokens: map[string]Token{}}
}

// CreateTeam implements TokenStore.
func (m *MemoryStore) CreateTeam(_ context.Context, t Team) error {
	if err := CheckTeamName(t.Name); err != nil {
		return fmt.Errorf("create team: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.teams[t.Name]; ok {
		return fmt.Errorf("create team %s: %w", t.Name, ErrTeamExists)
	}
	m.teams[t.Name] = t
	return nil
}

// ListTeams implements TokenStore.
func (m *MemoryStore) ListTeams(context.Context) ([]Team, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.SortedFunc(maps.Values(m.teams), func(a, b Team) int { return strings.Compare(a.Name, b.Name) }), nil
}

// DeleteTeam implements TokenStore.
func (m *MemoryStore) DeleteTeam(_ context.Context, name string, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.teams[name]; !ok {
		return fmt.Errorf("delete team %s: %w", name, ErrTeamNotFound)
	}
	for _, t := range m.tokens {
		if t.Team == name && t.Live(now) {
			return fmt.Errorf("delete team %s: token %s: %w", name, t.ID, ErrTeamInUse)
		}
	}
	delete(m.teams, name)
	return nil
}

// CreateToken implements TokenStore.
func (m *MemoryStore) CreateToken(_ context.Context, t Token) error {
	if err := t.Check(); err != nil {
		return fmt.Errorf("create token: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.teams[t.Team]; !ok && !t.ClusterAdmin {
		return fmt.Errorf("create token for team %s: %w", t.Team, ErrTeamNotFound)
	}
	if _, ok := m.tokens[t.ID]; ok {
		return fmt.Errorf("create token %s: %w", t.ID, ErrTokenExists)
	}
	t.SecretHash = slices.Clone(t.SecretHash)
	m.tokens[t.ID] = t
	return nil
}

// GetToken implements TokenStore.
func (m *MemoryStore) GetToken(_ context.Context, id string) (Token, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tokens[id]
	if !ok {
		return Token{}, fmt.Errorf("token %s: %w", id, ErrTokenNotFound)
	}
	t.SecretHash = slices.Clone(t.SecretHash)
	return t, nil
}

// ListTokens implements TokenStore.
func (m *MemoryStore) ListTokens(_ context.Context, team string) ([]Token, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Token
	for _, t := range m.tokens {
		if team == "" || t.Team == team {
			t.SecretHash = slices.Clone(t.SecretHash)
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b Token) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// RevokeToken implements TokenStore.
func (m *MemoryStore) RevokeToken(_ context.Context, id string, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tokens[id]
	if !ok {
		return fmt.Errorf("revoke token %s: %w", id, ErrTokenNotFound)
	}
	if t.RevokedAt.IsZero() {
		t.RevokedAt = at
		m.tokens[id] = t
	}
	return nil
}
