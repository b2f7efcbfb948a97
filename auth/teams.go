package auth

import (
	"context"
	"sync"
	"time"
)

// TeamLister lists the teams that exist; TokenStore is one.
type TeamLister interface {
	ListTeams(ctx context.Context) ([]Team, error)
}

// Defaults of KnownTeams.
const (
	// DefaultTeamsCacheTTL is how long a read of the teams is trusted for
	// a team found in it: a deleted team's JWTs keep working for at most
	// this long.
	DefaultTeamsCacheTTL = 10 * time.Second
	// teamsMissInterval is the least time between two reads caused by a
	// team the last read did not have, so that a flood of JWTs naming a
	// missing team costs at most one read a second; a team just created
	// is seen within it.
	teamsMissInterval = time.Second
)

// KnownTeams answers whether a team exists, from a TeamLister read at most
// once per TTL while the teams asked for are found, and at most once a
// second when one is not. Safe for concurrent use.
type KnownTeams struct {
	lister TeamLister
	ttl    time.Duration
	now    func() time.Time

	mu     sync.Mutex
	names  map[string]bool
	readAt time.Time
}

// NewKnownTeams returns a KnownTeams over lister; ttl 0 means
// DefaultTeamsCacheTTL.
func NewKnownTeams(lister TeamLister, ttl time.Duration, now func() time.Time) *KnownTeams {
	if ttl <= 0 {
		ttl = DefaultTeamsCacheTTL
	}
	return &KnownTeams{lister: lister, ttl: ttl, now: now}
}

// Exists reports whether team exists; the error is the lister's, the
// server's fault.
func (k *KnownTeams) Exists(ctx context.Context, team string) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	age := now.Sub(k.readAt)
	fresh := k.names != nil && age >= 0 && age < k.ttl
	if fresh && (k.names[team] || age < teamsMissInterval) {
		return k.names[team], nil
	}
	teams, err := k.lister.ListTeams(ctx)
	if err != nil {
		return false, err
	}
	k.names = make(map[string]bool, len(teams))
	for _, t := range teams {
		k.names[t.Name] = true
	}
	k.readAt = now
	return k.names[team], nil
}
