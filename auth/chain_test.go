package auth_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/auth/oidc"
	"github.com/sundialhq/sundial/auth/oidc/oidctest"
)

// TestJWTForUnknownTeamIsRefused protects teams from principals of teams
// nobody created: a valid JWT naming a team that does not exist is refused
// (unauthenticated, reason unknown_team), as a token for it could not be
// created; once the team is created, the same JWT is accepted.
func TestJWTForUnknownTeamIsRefused(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := &clock{now: now}
	is := oidctest.New(t)
	v, err := oidc.New(t.Context(), oidc.Config{Issuer: is.URL(), Audience: "sundial", AdminGroup: "admins", HTTPClient: is.Client(), Now: clock.Now})
	require.NoError(t, err)
	store := auth.NewMemoryStore()
	require.NoError(t, store.CreateTeam(t.Context(), auth.Team{Name: "payments", CreatedAt: now}))
	tokens, err := auth.NewTokens(auth.TokensConfig{Store: store, Now: clock.Now})
	require.NoError(t, err)
	chain, err := auth.NewChain(auth.ChainConfig{Tokens: tokens, OIDC: v, Teams: auth.NewKnownTeams(store, 0, clock.Now)})
	require.NoError(t, err)

	jwt := func(team string, groups ...string) string {
		return is.Sign(t, map[string]any{
			"iss": is.URL(), "sub": "alice", "aud": "sundial",
			"iat": now.Add(-time.Minute).Unix(), "exp": now.Add(time.Hour).Unix(),
			"sundial_team": team, "sundial_role": "admin", "groups": groups,
		})
	}
	p, err := chain.Authenticate(t.Context(), jwt("payments"))
	require.NoError(t, err)
	assert.Equal(t, "payments", p.Team)

	_, err = chain.Authenticate(t.Context(), jwt("ghost"))
	require.ErrorIs(t, err, auth.ErrUnauthenticated, "a JWT of a team that does not exist")
	var refused *auth.RefusedError
	require.ErrorAs(t, err, &refused)
	assert.Equal(t, auth.ReasonUnknownTeam, refused.Reason)
	assert.Contains(t, refused.Detail, `team "ghost" does not exist`)

	p, err = chain.Authenticate(t.Context(), jwt("ghost", "admins"))
	require.NoError(t, err, "a cluster admin acts for no one team")
	assert.True(t, p.ClusterAdmin)

	require.NoError(t, store.CreateTeam(t.Context(), auth.Team{Name: "ghost", CreatedAt: now}))
	clock.Add(time.Second)
	p, err = chain.Authenticate(t.Context(), jwt("ghost"))
	require.NoError(t, err, "a team just created is seen within a second")
	assert.Equal(t, "ghost", p.Team)
}

// countingLister counts the reads of the teams.
type countingLister struct {
	mu    sync.Mutex
	reads int
	teams []auth.Team
	err   error
}

func (l *countingLister) ListTeams(context.Context) ([]auth.Team, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reads++
	return l.teams, l.err
}

func TestKnownTeamsReadsAtMostOncePerInterval(t *testing.T) {
	t.Parallel()
	clock := &clock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := &countingLister{teams: []auth.Team{{Name: "payments"}}}
	k := auth.NewKnownTeams(l, 10*time.Second, clock.Now)
	steps := []struct {
		name      string
		advance   time.Duration
		team      string
		want      bool
		wantReads int
	}{
		{"the first question reads", 0, "payments", true, 1},
		{"a known team within the TTL is not read again", 5 * time.Second, "payments", true, 1},
		{"a missing team rereads after a second", 0, "ghost", false, 2},
		{"a missing team within the second is not reread", 500 * time.Millisecond, "ghost", false, 2},
		{"a missing team after the second rereads", 600 * time.Millisecond, "ghost", false, 3},
		{"past the TTL a known team rereads", 11 * time.Second, "payments", true, 4},
	}
	for _, s := range steps {
		clock.Add(s.advance)
		got, err := k.Exists(t.Context(), s.team)
		require.NoError(t, err, s.name)
		assert.Equal(t, s.want, got, s.name)
		assert.Equal(t, s.wantReads, l.reads, s.name)
	}
	l.err = errors.New("no hosts available")
	clock.Add(time.Minute)
	_, err := k.Exists(t.Context(), "payments")
	require.Error(t, err, "a store that cannot be read is the server's fault")
	assert.NotErrorIs(t, err, auth.ErrUnauthenticated)
}

// clock is a clock tests move by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
