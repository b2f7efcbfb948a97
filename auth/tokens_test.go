package auth

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// countingStore counts GetToken calls, to see the cache at work.
type countingStore struct {
	TokenStore
	mu   sync.Mutex
	gets int
	err  error
}

func (s *countingStore) GetToken(ctx context.Context, id string) (Token, error) {
	s.mu.Lock()
	s.gets++
	err := s.err
	s.mu.Unlock()
	if err != nil {
		return Token{}, err
	}
	return s.TokenStore.GetToken(ctx, id)
}

func (s *countingStore) Gets() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets
}

type tokensSetup struct {
	clock *fakeClock
	store *countingStore
	auth  *Tokens
}

func setupTokens(t *testing.T, ttl time.Duration, size int) tokensSetup {
	t.Helper()
	clock := &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	st := &countingStore{TokenStore: NewMemoryStore()}
	require.NoError(t, st.CreateTeam(t.Context(), Team{Name: "payments", CreatedAt: clock.Now()}))
	a, err := NewTokens(TokensConfig{Store: st, CacheTTL: ttl, CacheSize: size, Now: clock.Now})
	require.NoError(t, err)
	return tokensSetup{clock: clock, store: st, auth: a}
}

// issue stores a new token of payments and returns its bearer.
func (s tokensSetup) issue(t *testing.T, role Role, expires time.Duration) (Token, string) {
	t.Helper()
	cred, err := GenerateCredential(nil)
	require.NoError(t, err)
	tok := Token{ID: cred.ID, Team: "payments", Role: role, SecretHash: HashSecret(cred.Secret), CreatedAt: s.clock.Now()}
	if expires > 0 {
		tok.ExpiresAt = s.clock.Now().Add(expires)
	}
	require.NoError(t, s.store.CreateToken(t.Context(), tok))
	return tok, cred.Bearer()
}

func refusedFor(t *testing.T, err error) string {
	t.Helper()
	require.ErrorIs(t, err, ErrUnauthenticated)
	var r *RefusedError
	require.ErrorAs(t, err, &r)
	return r.Reason
}

func TestBearerRoundTrip(t *testing.T) {
	t.Parallel()
	cred, err := GenerateCredential(nil)
	require.NoError(t, err)
	bearer := cred.Bearer()
	assert.True(t, strings.HasPrefix(bearer, "sdl_"+cred.ID+"_"))
	got, err := ParseBearer(bearer)
	require.NoError(t, err)
	assert.Equal(t, cred, got)
	assert.NotContains(t, cred.String(), cred.Secret, "printing a credential hides its secret")

	for _, bad := range []string{"", "sdl_", "sdl_abc_def", "Bearer " + bearer, "sdl_" + cred.ID, "sdl_" + cred.ID + "_" + cred.Secret[1:], "sdl_" + cred.ID + "_" + strings.ToUpper(cred.Secret)} {
		_, err := ParseBearer(bad)
		require.Error(t, err, "%q", bad)
		assert.NotContains(t, err.Error(), cred.Secret[:20], "the error never shows the secret")
	}
}

func TestTokensAuthenticate(t *testing.T) {
	t.Parallel()
	s := setupTokens(t, time.Second, 0)
	ctx := t.Context()
	tok, bearer := s.issue(t, RoleOperator, time.Hour)

	p, err := s.auth.Authenticate(ctx, bearer)
	require.NoError(t, err)
	assert.Equal(t, Principal{Subject: "token:" + tok.ID, Team: "payments", Role: RoleOperator}, p)

	cred, _ := ParseBearer(bearer)
	other, err := GenerateCredential(nil)
	require.NoError(t, err)
	for name, tc := range map[string]struct{ bearer, reason string }{
		"malformed":    {"sdl_nope", ReasonMalformed},
		"unknown id":   {other.Bearer(), ReasonUnknown},
		"wrong secret": {Credential{ID: cred.ID, Secret: other.Secret}.Bearer(), ReasonBadSecret},
	} {
		_, err := s.auth.Authenticate(ctx, tc.bearer)
		assert.Equal(t, tc.reason, refusedFor(t, err), name)
		assert.NotContains(t, err.Error(), other.Secret, name)
		assert.NotContains(t, err.Error(), cred.Secret, name)
	}

	// A cached token still expires on time.
	s.clock.Advance(time.Hour)
	_, err = s.auth.Authenticate(ctx, bearer)
	assert.Equal(t, ReasonExpired, refusedFor(t, err))
}

func TestTokensCacheBoundsRevocation(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Second
	s := setupTokens(t, ttl, 0)
	ctx := t.Context()
	tok, bearer := s.issue(t, RoleViewer, 0)

	for range 5 {
		_, err := s.auth.Authenticate(ctx, bearer)
		require.NoError(t, err)
	}
	assert.Equal(t, 1, s.store.Gets(), "one read, then the cache")

	// A wrong secret for a cached id is refused without a read.
	cred, _ := ParseBearer(bearer)
	other, _ := GenerateCredential(nil)
	_, err := s.auth.Authenticate(ctx, Credential{ID: cred.ID, Secret: other.Secret}.Bearer())
	assert.Equal(t, ReasonBadSecret, refusedFor(t, err))
	assert.Equal(t, 1, s.store.Gets())

	require.NoError(t, s.store.RevokeToken(ctx, tok.ID, s.clock.Now()))
	s.clock.Advance(ttl - time.Millisecond)
	_, err = s.auth.Authenticate(ctx, bearer)
	require.NoError(t, err, "within the TTL the cached token still works: the documented bound")
	s.clock.Advance(time.Millisecond)
	_, err = s.auth.Authenticate(ctx, bearer)
	assert.Equal(t, ReasonRevoked, refusedFor(t, err), "after the TTL the revocation is seen")
	assert.Equal(t, 2, s.store.Gets())
	assert.Equal(t, 0, s.auth.cacheLen(), "a refused token leaves the cache")
}

func TestTokensCacheIsBounded(t *testing.T) {
	t.Parallel()
	s := setupTokens(t, time.Minute, 3)
	for range 10 {
		_, bearer := s.issue(t, RoleViewer, 0)
		_, err := s.auth.Authenticate(t.Context(), bearer)
		require.NoError(t, err)
		assert.LessOrEqual(t, s.auth.cacheLen(), 3)
	}
	assert.Equal(t, 3, s.auth.cacheLen())
}

func TestTokensNoCache(t *testing.T) {
	t.Parallel()
	s := setupTokens(t, -1, 0)
	_, bearer := s.issue(t, RoleViewer, 0)
	for range 3 {
		_, err := s.auth.Authenticate(t.Context(), bearer)
		require.NoError(t, err)
	}
	assert.Equal(t, 3, s.store.Gets())
}

func TestTokensStoreFailureIsNotARefusal(t *testing.T) {
	t.Parallel()
	s := setupTokens(t, time.Second, 0)
	_, bearer := s.issue(t, RoleViewer, 0)
	down := errors.New("cassandra: no hosts available")
	s.store.mu.Lock()
	s.store.err = down
	s.store.mu.Unlock()
	_, err := s.auth.Authenticate(t.Context(), bearer)
	require.ErrorIs(t, err, down)
	assert.NotErrorIs(t, err, ErrUnauthenticated, "the server's fault, not the caller's")
}

func TestTokensConfigValidate(t *testing.T) {
	t.Parallel()
	_, err := NewTokens(TokensConfig{CacheSize: -1})
	require.Error(t, err)
	for _, want := range []string{"store: required", "now: required", "cache size: -1"} {
		assert.ErrorContains(t, err, want)
	}
}

// stubAuth answers every bearer the same way.
type stubAuth struct {
	p   Principal
	err error
}

func (s stubAuth) Authenticate(context.Context, string) (Principal, error) { return s.p, s.err }

func TestChainRoutesAndCounts(t *testing.T) {
	t.Parallel()
	s := setupTokens(t, time.Second, 0)
	_, bearer := s.issue(t, RoleAdmin, 0)
	reg := prometheus.NewPedanticRegistry()
	oidcP := Principal{Subject: "oidc:issuer#alice", Team: "payments", Role: RoleViewer}
	chain, err := NewChain(ChainConfig{Tokens: s.auth, OIDC: stubAuth{p: oidcP}, Registerer: reg})
	require.NoError(t, err)
	ctx := t.Context()

	p, err := chain.Authenticate(ctx, bearer)
	require.NoError(t, err)
	assert.Equal(t, "payments", p.Team)
	p, err = chain.Authenticate(ctx, "eyJhbGciOi.jwt.sig")
	require.NoError(t, err)
	assert.Equal(t, oidcP, p, "a bearer without the sdl_ prefix goes to OIDC")
	_, err = chain.Authenticate(ctx, "sdl_broken")
	assert.Equal(t, ReasonMalformed, refusedFor(t, err), "an sdl_ bearer never falls through to OIDC")
	_, err = chain.Authenticate(ctx, "")
	assert.Equal(t, ReasonMalformed, refusedFor(t, err))

	_, err = NewChain(ChainConfig{Tokens: s.auth, Registerer: reg})
	require.Error(t, err, "the metric is registered once per registry")
	noOIDC, err := NewChain(ChainConfig{Tokens: s.auth})
	require.NoError(t, err)
	_, err = noOIDC.Authenticate(ctx, "eyJhbGciOi.jwt.sig")
	assert.Equal(t, ReasonNoMethod, refusedFor(t, err))

	assert.Equal(t, 1.0, testutil.ToFloat64(chain.results.WithLabelValues("token", "ok")))
	assert.Equal(t, 1.0, testutil.ToFloat64(chain.results.WithLabelValues("oidc", "ok")))
	assert.Equal(t, 1.0, testutil.ToFloat64(chain.results.WithLabelValues("token", ReasonMalformed)))
	assert.Equal(t, 1.0, testutil.ToFloat64(chain.results.WithLabelValues("none", ReasonMalformed)))
	n, err := testutil.GatherAndCount(reg, "sundial_auth_authentications_total")
	require.NoError(t, err)
	assert.Equal(t, 4, n)

	_, err = NewChain(ChainConfig{})
	assert.ErrorContains(t, err, "tokens: required")
}

// FuzzParseBearer checks that any bearer either parses into a credential
// that prints back to the same bearer, or is refused without its secret
// part in the error.
func FuzzParseBearer(f *testing.F) {
	cred, err := GenerateCredential(nil)
	require.NoError(f, err)
	for _, seed := range []string{cred.Bearer(), "", "sdl_", "sdl__", "sdl_a_b", "eyJ.x.y", cred.Bearer() + "_x", "sdl_" + cred.ID + "__" + cred.Secret} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, bearer string) {
		got, err := ParseBearer(bearer)
		if err != nil {
			// The id may be named; a secret that is part of it cannot
			// be told apart from it.
			if id, secret, ok := strings.Cut(strings.TrimPrefix(bearer, TokenPrefix), "_"); ok && len(secret) > 8 && !strings.Contains(id, secret) {
				assert.NotContains(t, err.Error(), secret)
			}
			return
		}
		assert.Equal(t, bearer, got.Bearer())
		assert.True(t, validTokenID(got.ID))
	})
}

func TestTokensConcurrentUse(t *testing.T) {
	t.Parallel()
	s := setupTokens(t, time.Minute, 4)
	var bearers []string
	for range 8 {
		_, b := s.issue(t, RoleViewer, 0)
		bearers = append(bearers, b)
	}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			for j := range 50 {
				_, err := s.auth.Authenticate(t.Context(), bearers[(i+j)%len(bearers)])
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, s.auth.cacheLen(), 4)
}
