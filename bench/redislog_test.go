package bench

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/internal/testenv"
)

// TestCompactRedisLog: on a Redis that keeps an append-only file (the
// local stack's does), the bench's rewrite after its baselines runs to its
// end; on one that keeps none it does nothing.
func TestCompactRedisLog(t *testing.T) {
	t.Parallel()
	r := testenv.NeedRedis(t)
	rc := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { _ = rc.Close() })
	ctx := t.Context()
	require.NoError(t, rc.Set(ctx, r.KeyPrefix+"k", "v", 0).Err())
	info, err := rc.InfoMap(ctx, "persistence").Result()
	require.NoError(t, err)
	aof := info["Persistence"]["aof_enabled"] == "1"

	done, err := compactRedisLog(ctx, rc)
	require.NoError(t, err)
	assert.Equal(t, aof, done)
	if !aof {
		return
	}
	info, err = rc.InfoMap(ctx, "persistence").Result()
	require.NoError(t, err)
	assert.Equal(t, "0", info["Persistence"]["aof_rewrite_in_progress"])
	assert.Equal(t, "ok", info["Persistence"]["aof_last_bgrewrite_status"])
	got, err := rc.Get(ctx, r.KeyPrefix+"k").Result()
	require.NoError(t, err)
	assert.Equal(t, "v", got, "the dataset is untouched")
}
