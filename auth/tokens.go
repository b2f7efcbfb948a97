package auth

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Defaults of TokensConfig.
const (
	DefaultTokenCacheTTL  = 10 * time.Second
	DefaultTokenCacheSize = 10_000
)

// TokensConfig configures a Tokens authenticator.
type TokensConfig struct {
	// Store holds the tokens. Required.
	Store TokenStore
	// CacheTTL is how long a token read from Store is trusted without
	// reading it again. It bounds how long a revoked token keeps working
	// on a server that had it cached: at most CacheTTL after the
	// revocation is written. Zero means DefaultTokenCacheTTL; negative
	// disables the cache.
	CacheTTL time.Duration
	// CacheSize bounds the cached tokens. Zero means DefaultTokenCacheSize.
	CacheSize int
	// Now is the clock of expiry and of the cache. Required.
	Now func() time.Time
}

// Validate reports every bad field.
func (c TokensConfig) Validate() error {
	var bad []error
	if c.Store == nil {
		bad = append(bad, errors.New("tokens config: store: required"))
	}
	if c.Now == nil {
		bad = append(bad, errors.New("tokens config: now: required"))
	}
	if c.CacheSize < 0 {
		bad = append(bad, fmt.Errorf("tokens config: cache size: %d, want >= 0", c.CacheSize))
	}
	return errors.Join(bad...)
}

// Tokens authenticates Sundial's own bearer tokens (sdl_<id>_<secret>)
// against a TokenStore. Only tokens that were found and live are cached,
// and a cached token is still checked for its secret and its expiry at
// every call; an unknown id is read from the store every time. Safe for
// concurrent use.
type Tokens struct {
	store TokenStore
	ttl   time.Duration
	size  int
	now   func() time.Time

	mu    sync.Mutex
	cache map[string]cachedToken
}

type cachedToken struct {
	token  Token
	readAt time.Time
}

// NewTokens returns a Tokens authenticator.
func NewTokens(c TokensConfig) (*Tokens, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &Tokens{
		store: c.Store, ttl: cmp.Or(c.CacheTTL, DefaultTokenCacheTTL), size: cmp.Or(c.CacheSize, DefaultTokenCacheSize),
		now: c.Now, cache: map[string]cachedToken{},
	}, nil
}

// Authenticate returns the principal of bearer, a RefusedError (matching
// ErrUnauthenticated) when the token is malformed, unknown, wrong, revoked
// or expired, or another error when the store cannot be read.
func (a *Tokens) Authenticate(ctx context.Context, bearer string) (Principal, error) {
	cred, err := ParseBearer(bearer)
	if err != nil {
		return Principal{}, Refuse(ReasonMalformed, err.Error())
	}
	now := a.now()
	tok, ok := a.cached(cred.ID, now)
	if !ok {
		tok, err = a.store.GetToken(ctx, cred.ID)
		if errors.Is(err, ErrTokenNotFound) {
			return Principal{}, Refuse(ReasonUnknown, fmt.Sprintf("token %s: unknown", cred.ID))
		}
		if err != nil {
			return Principal{}, fmt.Errorf("authenticate token %s: %w", cred.ID, err)
		}
	}
	if !secretMatches(tok.SecretHash, cred.Secret) {
		return Principal{}, Refuse(ReasonBadSecret, fmt.Sprintf("token %s: wrong secret", cred.ID))
	}
	if !tok.RevokedAt.IsZero() {
		a.forget(cred.ID)
		return Principal{}, Refuse(ReasonRevoked, fmt.Sprintf("token %s: revoked at %s", cred.ID, tok.RevokedAt.UTC().Format(time.RFC3339)))
	}
	if !tok.Live(now) {
		a.forget(cred.ID)
		return Principal{}, Refuse(ReasonExpired, fmt.Sprintf("token %s: expired at %s", cred.ID, tok.ExpiresAt.UTC().Format(time.RFC3339)))
	}
	if !ok {
		a.remember(tok, now)
	}
	return tok.Principal(), nil
}

// cached returns the token read within the TTL.
func (a *Tokens) cached(id string, now time.Time) (Token, bool) {
	if a.ttl < 0 {
		return Token{}, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	c, ok := a.cache[id]
	if !ok || now.Sub(c.readAt) >= a.ttl || now.Before(c.readAt) {
		return Token{}, false
	}
	return c.token, true
}

// remember caches a live token. When the cache is full it first drops the
// stale entries, then, if none was, one arbitrary entry: the cache only
// saves reads, so losing an entry costs one read.
func (a *Tokens) remember(t Token, now time.Time) {
	if a.ttl < 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.cache[t.ID]; !ok && len(a.cache) >= a.size {
		for id, c := range a.cache {
			if now.Sub(c.readAt) >= a.ttl {
				delete(a.cache, id)
			}
		}
		for id := range a.cache {
			if len(a.cache) < a.size {
				break
			}
			delete(a.cache, id)
		}
	}
	a.cache[t.ID] = cachedToken{token: t, readAt: now}
}

func (a *Tokens) forget(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.cache, id)
}

// cacheLen is the number of cached tokens, for tests.
func (a *Tokens) cacheLen() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.cache)
}
