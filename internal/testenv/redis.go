package testenv

import (
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Redis is a test's view of a Redis server.
type Redis struct {
	// Addr is host:port.
	Addr string
	// KeyPrefix is prepended to every key the test writes; keys with it are
	// deleted at cleanup. It holds no hash tag, so callers can add their own.
	KeyPrefix string
}

// NeedRedis returns a reachable Redis and a key prefix of the test's own.
func NeedRedis(t testing.TB) Redis {
	t.Helper()
	skipShort(t, "Redis")
	addr := ""
	if a := addresses(EnvRedis); len(a) > 0 {
		addr = a[0]
	} else {
		var err error
		addr, err = containerRedis()
		if err != nil {
			unavailable(t, "Redis", EnvRedis, err.Error())
		}
	}
	client := redis.NewClient(&redis.Options{Addr: addr})
	ctx, cancel := timeoutCtx()
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		t.Fatalf("redis at %s does not answer PING: %v (%s)", addr, err, howToStart)
	}
	r := Redis{Addr: addr, KeyPrefix: fmt.Sprintf("t:%s:%s:", slug(t.Name(), 20), randomSuffix())}
	t.Cleanup(func() {
		defer func() { _ = client.Close() }()
		ctx, cancel := timeoutCtx()
		defer cancel()
		iter := client.Scan(ctx, 0, r.KeyPrefix+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Logf("cleanup: scan %s*: %v", r.KeyPrefix, err)
			return
		}
		for len(keys) > 0 {
			n := min(len(keys), 500)
			if err := client.Unlink(ctx, keys[:n]...).Err(); err != nil {
				t.Logf("cleanup: unlink: %v", err)
				return
			}
			keys = keys[n:]
		}
	})
	return r
}
