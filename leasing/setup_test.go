package leasing

import (
	"context"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/internal/testenv"
)

// backend is a Redis a test may use: an address (or a cluster's) and a key
// prefix no other test uses.
type backend struct {
	addr string
	// cluster, when set, are the nodes of a Redis Cluster; addr is unused.
	cluster []string
	prefix  string
}

// backendFactory gives each test its own backend.
type backendFactory func(t testing.TB) backend

// realRedis is the local stack's Redis.
func realRedis(t testing.TB) backend {
	env := testenv.NeedRedis(t)
	return backend{addr: env.Addr, prefix: env.KeyPrefix}
}

// miniRedis is an in-process Redis of the embedded mode, one per test, whose
// TTLs run on the wall clock like a real server's.
func miniRedis(t testing.TB) backend {
	mr := miniredis.RunT(t)
	mr.ClockTTL(true)
	return backend{addr: mr.Addr(), prefix: "t:"}
}

// client returns a client of b, closed at cleanup.
func (b backend) client(t testing.TB, hooks ...redis.Hook) redis.UniversalClient {
	var c redis.UniversalClient
	if len(b.cluster) > 0 {
		c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: b.cluster})
	} else {
		c = redis.NewClient(&redis.Options{Addr: b.addr})
	}
	for _, h := range hooks {
		c.AddHook(h)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// setup returns a Store on b with test-friendly TTLs, changed by opts.
func setup(t testing.TB, b backend, opts ...func(*Config)) (*Store, redis.UniversalClient) {
	t.Helper()
	return setupHooked(t, b, nil, opts...)
}

// setupHooked is setup with hooks on the store's client.
func setupHooked(t testing.TB, b backend, hooks []redis.Hook, opts ...func(*Config)) (*Store, redis.UniversalClient) {
	t.Helper()
	c := b.client(t, hooks...)
	cfg := Config{Client: c, KeyPrefix: b.prefix, TTL: 300 * time.Millisecond, Margin: 60 * time.Millisecond}
	for _, o := range opts {
		o(&cfg)
	}
	s, err := New(cfg)
	require.NoError(t, err)
	require.NoError(t, s.Load(context.Background()))
	return s, c
}

// keeperTimes is the lease timing of tests whose Keeper must renew in time:
// a renewal (at TTL/3) may be late by TTL*2/3 - Margin = 1.5s before the
// lease stops being trusted, which a heavily loaded two-core machine needs
// (at 600ms TTL a renewal late by more than 250ms was seen in CI, and at
// 1.5s TTL one late by more than 700ms).
func keeperTimes(c *Config) { c.TTL, c.Margin = 3*time.Second, 500*time.Millisecond }

// steadyTimes is the lease timing of tests that must not see a lease expire:
// their outcome would otherwise depend on how long a loaded machine takes
// between two calls. Only the tests of expiry use a TTL short enough to
// wait out.
func steadyTimes(c *Config) { c.TTL, c.Margin = time.Minute, 10*time.Second }

// outage is a hook that makes every command fail as if the connection to
// Redis were reset, while down is set.
type outage struct{ down atomic.Bool }

var errReset = &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}

func (o *outage) DialHook(next redis.DialHook) redis.DialHook { return next }

func (o *outage) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if o.down.Load() {
			cmd.SetErr(errReset)
			return errReset
		}
		return next(ctx, cmd)
	}
}

func (o *outage) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if o.down.Load() {
			for _, c := range cmds {
				c.SetErr(errReset)
			}
			return errReset
		}
		return next(ctx, cmds)
	}
}

// slowClock is a hook that moves a fake clock forward while every command
// is out, to tell the start of a call from its end.
type slowClock struct {
	now  atomic.Int64 // unix nanoseconds
	step time.Duration
}

func (c *slowClock) Now() time.Time { return time.Unix(0, c.now.Load()) }

func (c *slowClock) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *slowClock) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		c.now.Add(int64(c.step))
		return err
	}
}

func (c *slowClock) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		c.now.Add(int64(c.step))
		return err
	}
}
