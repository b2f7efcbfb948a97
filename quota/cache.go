package quota

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Lister lists the quota rows (Store.ListQuotas).
type Lister interface {
	ListQuotas(ctx context.Context) ([]Quota, error)
}

// Cache answers Effective from a copy of the rows read at most TTL ago, so
// that the registry and the runners do not read the store for every
// definition or run. A change of quota takes effect within TTL (plus one
// read). It does I/O only inside Get, when the copy is older than TTL: one
// caller reads while the others go on with the old copy, and when that read
// fails the old copy stays in use; only a Cache that never read reports the
// error.
type Cache struct {
	src Lister
	ttl time.Duration
	now func() time.Time

	mu         sync.Mutex
	rows       []Quota
	readAt     time.Time
	loaded     bool
	refreshing bool
}

// DefaultCacheTTL is how stale a Cache may be by default.
const DefaultCacheTTL = 10 * time.Second

// NewCache returns a Cache over src; ttl 0 means DefaultCacheTTL, now nil
// means time.Now.
func NewCache(src Lister, ttl time.Duration, now func() time.Time) *Cache {
	if ttl <= 0 {
		ttl = DefaultCacheTTL
	}
	if now == nil {
		now = time.Now
	}
	return &Cache{src: src, ttl: ttl, now: now}
}

// Get returns the quota in force for team.
func (c *Cache) Get(ctx context.Context, team string) (Quota, error) {
	rows, err := c.Rows(ctx)
	if err != nil {
		return Quota{}, err
	}
	return Effective(rows, team), nil
}

// Rows returns the cached rows, read again when older than the TTL.
func (c *Cache) Rows(ctx context.Context) ([]Quota, error) {
	c.mu.Lock()
	if c.loaded && (c.refreshing || c.now().Sub(c.readAt) < c.ttl) {
		rows := c.rows
		c.mu.Unlock()
		return rows, nil
	}
	c.refreshing = true
	c.mu.Unlock()

	rows, err := c.src.ListQuotas(ctx)

	c.mu.Lock()
	defer c.mu.Unlock()
	c.refreshing = false
	if err != nil {
		if c.loaded {
			return c.rows, nil
		}
		return nil, fmt.Errorf("read quotas: %w", err)
	}
	c.rows, c.readAt, c.loaded = rows, c.now(), true
	return rows, nil
}

// GetFresh returns the quota in force for team as the store has it now,
// and keeps the rows read for the next Gets. It is for the one answer that
// must not be stale: a refusal. The registry refuses a create over max_jobs
// only after reading the limit through, so a limit just raised applies to
// the very next definition, while every definition that passes still costs
// no read (a limit just lowered takes effect within TTL).
func (c *Cache) GetFresh(ctx context.Context, team string) (Quota, error) {
	rows, err := c.src.ListQuotas(ctx)
	if err != nil {
		return Quota{}, fmt.Errorf("read quotas: %w", err)
	}
	c.mu.Lock()
	c.rows, c.readAt, c.loaded = rows, c.now(), true
	c.mu.Unlock()
	return Effective(rows, team), nil
}
