package authtest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/auth"
)

// Factory returns the store under test.
type Factory func(t *testing.T) auth.TokenStore

// base is a fixed instant, to the millisecond (Cassandra's precision).
var base = time.Date(2030, 1, 2, 3, 4, 5, 6_000_000, time.UTC)

// Run runs every conformance case against the store newStore returns.
func Run(t *testing.T, newStore Factory) {
	s := newStore(t)
	cases := []struct {
		name string
		fn   func(t *testing.T, s auth.TokenStore)
	}{
		{"TeamCreateListDelete", testTeamCreateListDelete},
		{"TeamValidation", testTeamValidation},
		{"DeleteTeamWithLiveToken", testDeleteTeamWithLiveToken},
		{"TokenRoundTrip", testTokenRoundTrip},
		{"ClusterAdminToken", testClusterAdminToken},
		{"TokenIDTaken", testTokenIDTaken},
		{"TokenNeedsTeam", testTokenNeedsTeam},
		{"TokenValidation", testTokenValidation},
		{"ListTokensByTeam", testListTokensByTeam},
		{"RevokeKeepsFirstTime", testRevokeKeepsFirstTime},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, s)
		})
	}
}

// newToken returns a valid, live token of team with a fresh id.
func newToken(t *testing.T, team string, role auth.Role) (auth.Token, auth.Credential) {
	t.Helper()
	cred, err := auth.GenerateCredential(nil)
	require.NoError(t, err)
	return auth.Token{
		ID: cred.ID, Team: team, Role: role, SecretHash: auth.HashSecret(cred.Secret),
		CreatedAt: base, CreatedBy: "test", Description: "conformance " + t.Name(),
	}, cred
}

func createTeam(ctx context.Context, t *testing.T, s auth.TokenStore, name string) {
	t.Helper()
	require.NoError(t, s.CreateTeam(ctx, auth.Team{Name: name, Description: "team " + name, CreatedAt: base, CreatedBy: "test"}))
}

func teamNames(t *testing.T, s auth.TokenStore) []string {
	t.Helper()
	teams, err := s.ListTeams(t.Context())
	require.NoError(t, err)
	var names []string
	for _, tm := range teams {
		names = append(names, tm.Name)
	}
	require.True(t, slices.IsSorted(names), "teams are listed by name: %v", names)
	return names
}

func testTeamCreateListDelete(t *testing.T, s auth.TokenStore) {
	ctx := t.Context()
	createTeam(ctx, t, s, "payments")
	createTeam(ctx, t, s, "ads")
	teams, err := s.ListTeams(ctx)
	require.NoError(t, err)
	i := slices.IndexFunc(teams, func(tm auth.Team) bool { return tm.Name == "payments" })
	require.GreaterOrEqual(t, i, 0, "payments is listed: %+v", teams)
	assert.Equal(t, auth.Team{Name: "payments", Description: "team payments", CreatedAt: base, CreatedBy: "test"}, teams[i])
	assert.Subset(t, teamNames(t, s), []string{"ads", "payments"})

	err = s.CreateTeam(ctx, auth.Team{Name: "payments", CreatedAt: base})
	require.ErrorIs(t, err, auth.ErrTeamExists, "a second create of payments")

	require.NoError(t, s.DeleteTeam(ctx, "ads", base))
	assert.NotContains(t, teamNames(t, s), "ads")
	require.ErrorIs(t, s.DeleteTeam(ctx, "ads", base), auth.ErrTeamNotFound, "deleting it again")
}

func testTeamValidation(t *testing.T, s auth.TokenStore) {
	for _, name := range []string{"", "Payments", "-x", "a_b", "a b", string(make([]byte, 64))} {
		err := s.CreateTeam(t.Context(), auth.Team{Name: name, CreatedAt: base})
		require.Error(t, err, "team name %q", name)
		assert.ErrorContains(t, err, "team name")
	}
}

func testDeleteTeamWithLiveToken(t *testing.T, s auth.TokenStore) {
	ctx := t.Context()
	createTeam(ctx, t, s, "inuse")
	tok, _ := newToken(t, "inuse", auth.RoleViewer)
	require.NoError(t, s.CreateToken(ctx, tok))
	err := s.DeleteTeam(ctx, "inuse", base)
	require.ErrorIs(t, err, auth.ErrTeamInUse)
	assert.ErrorContains(t, err, tok.ID, "the error names the live token")

	// An expired token does not hold its team.
	expiring, _ := newToken(t, "inuse", auth.RoleViewer)
	expiring.ExpiresAt = base.Add(time.Hour)
	require.NoError(t, s.CreateToken(ctx, expiring))
	require.NoError(t, s.RevokeToken(ctx, tok.ID, base))
	require.NoError(t, s.DeleteTeam(ctx, "inuse", base.Add(2*time.Hour)))
	assert.NotContains(t, teamNames(t, s), "inuse")
}

func testTokenRoundTrip(t *testing.T, s auth.TokenStore) {
	ctx := t.Context()
	createTeam(ctx, t, s, "roundtrip")
	tok, cred := newToken(t, "roundtrip", auth.RoleOperator)
	tok.ExpiresAt = base.Add(720 * time.Hour)
	require.NoError(t, s.CreateToken(ctx, tok))
	got, err := s.GetToken(ctx, cred.ID)
	require.NoError(t, err)
	assert.Equal(t, tok, got)
	assert.True(t, got.Live(base))
	assert.False(t, got.Live(tok.ExpiresAt))

	unknown, err := auth.GenerateCredential(nil)
	require.NoError(t, err)
	_, err = s.GetToken(ctx, unknown.ID)
	require.ErrorIs(t, err, auth.ErrTokenNotFound)
}

func testClusterAdminToken(t *testing.T, s auth.TokenStore) {
	ctx := t.Context()
	tok, _ := newToken(t, "", auth.RoleAdmin)
	tok.ClusterAdmin = true
	require.NoError(t, s.CreateToken(ctx, tok), "a cluster-admin token needs no team")
	got, err := s.GetToken(ctx, tok.ID)
	require.NoError(t, err)
	assert.Equal(t, tok, got)
	assert.Equal(t, auth.Principal{Subject: "token:" + tok.ID, Role: auth.RoleAdmin, ClusterAdmin: true}, got.Principal())
}

func testTokenIDTaken(t *testing.T, s auth.TokenStore) {
	ctx := t.Context()
	createTeam(ctx, t, s, "taken")
	tok, _ := newToken(t, "taken", auth.RoleViewer)
	require.NoError(t, s.CreateToken(ctx, tok))
	again := tok
	again.Role = auth.RoleAdmin
	again.SecretHash = auth.HashSecret("another secret")
	require.ErrorIs(t, s.CreateToken(ctx, again), auth.ErrTokenExists)
	got, err := s.GetToken(ctx, tok.ID)
	require.NoError(t, err)
	assert.Equal(t, tok, got, "the first token is unchanged")
}

func testTokenNeedsTeam(t *testing.T, s auth.TokenStore) {
	ctx := t.Context()
	tok, _ := newToken(t, "no-such-team", auth.RoleViewer)
	require.ErrorIs(t, s.CreateToken(ctx, tok), auth.ErrTeamNotFound)
	_, err := s.GetToken(ctx, tok.ID)
	require.ErrorIs(t, err, auth.ErrTokenNotFound, "nothing was stored")
}

func testTokenValidation(t *testing.T, s auth.TokenStore) {
	ctx := t.Context()
	createTeam(ctx, t, s, "validation")
	cases := map[string]func(*auth.Token){
		"token id":       func(tk *auth.Token) { tk.ID = "short" },
		"token role":     func(tk *auth.Token) { tk.Role = auth.RoleNone },
		"secret hash":    func(tk *auth.Token) { tk.SecretHash = []byte("plain") },
		"created_at":     func(tk *auth.Token) { tk.CreatedAt = time.Time{} },
		"expires_at":     func(tk *auth.Token) { tk.ExpiresAt = base.Add(-time.Second) },
		"names none":     func(tk *auth.Token) { tk.ClusterAdmin = true },
		"has role admin": func(tk *auth.Token) { tk.ClusterAdmin, tk.Team = true, "" },
		"token team":     func(tk *auth.Token) { tk.Team = "Bad Name" },
	}
	for want, mutate := range cases {
		tok, _ := newToken(t, "validation", auth.RoleViewer)
		mutate(&tok)
		err := s.CreateToken(ctx, tok)
		require.Error(t, err, want)
		assert.ErrorContains(t, err, want)
	}
}

func testListTokensByTeam(t *testing.T, s auth.TokenStore) {
	ctx := t.Context()
	createTeam(ctx, t, s, "list-a")
	createTeam(ctx, t, s, "list-b")
	var a []string
	for range 3 {
		tok, _ := newToken(t, "list-a", auth.RoleViewer)
		require.NoError(t, s.CreateToken(ctx, tok))
		a = append(a, tok.ID)
	}
	b, _ := newToken(t, "list-b", auth.RoleAdmin)
	require.NoError(t, s.CreateToken(ctx, b))
	require.NoError(t, s.RevokeToken(ctx, a[0], base))

	ids := func(team string) []string {
		toks, err := s.ListTokens(ctx, team)
		require.NoError(t, err)
		var out []string
		for _, tk := range toks {
			out = append(out, tk.ID)
			if team != "" {
				assert.Equal(t, team, tk.Team)
			}
		}
		require.True(t, slices.IsSorted(out), "tokens are listed by id: %v", out)
		return out
	}
	slices.Sort(a)
	assert.Equal(t, a, ids("list-a"), "revoked tokens are listed too")
	assert.Equal(t, []string{b.ID}, ids("list-b"))
	assert.Subset(t, ids(""), append(slices.Clone(a), b.ID))
	assert.Empty(t, ids("list-none"))
}

func testRevokeKeepsFirstTime(t *testing.T, s auth.TokenStore) {
	ctx := t.Context()
	createTeam(ctx, t, s, "revoke")
	tok, _ := newToken(t, "revoke", auth.RoleViewer)
	require.NoError(t, s.CreateToken(ctx, tok))
	require.NoError(t, s.RevokeToken(ctx, tok.ID, base.Add(time.Minute)))
	require.NoError(t, s.RevokeToken(ctx, tok.ID, base.Add(time.Hour)), "revoking twice is not an error")
	got, err := s.GetToken(ctx, tok.ID)
	require.NoError(t, err)
	assert.Equal(t, base.Add(time.Minute), got.RevokedAt)
	assert.False(t, got.Live(base.Add(2*time.Minute)))

	unknown, err := auth.GenerateCredential(nil)
	require.NoError(t, err)
	require.ErrorIs(t, s.RevokeToken(ctx, unknown.ID, base), auth.ErrTokenNotFound)
}
