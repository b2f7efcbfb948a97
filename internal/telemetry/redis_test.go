package telemetry_test

import (
	"context"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/internal/telemetry"
	"github.com/sundialhq/sundial/internal/testenv"
)

func TestInstrumentRedisRecordsCommandsAndPool(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = client.Close() })
	reg := prometheus.NewRegistry()
	require.NoError(t, telemetry.InstrumentRedis(client, reg, "leases"))
	ctx := t.Context()

	require.NoError(t, client.Set(ctx, "k", "v", 0).Err())
	require.ErrorIs(t, client.Get(ctx, "missing").Err(), redis.Nil)
	script := redis.NewScript(`return 1`)
	require.NoError(t, script.Run(ctx, client, []string{"{job}:a"}).Err())
	_, err := client.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, "a")
		p.Incr(ctx, "b")
		return nil
	})
	require.NoError(t, err)
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	require.Error(t, client.Get(canceled, "k").Err())

	const name = "sundial_redis_command_duration_seconds"
	assert.EqualValues(t, 1, histogramCount(t, reg, name, map[string]string{"client": "leases", "command": "set", "outcome": "ok"}))
	assert.EqualValues(t, 1, histogramCount(t, reg, name, map[string]string{"command": "get", "outcome": "nil"}))
	assert.EqualValues(t, 1, histogramCount(t, reg, name, map[string]string{"command": "get", "outcome": "canceled"}))
	// Script.Run tries EVALSHA, gets NOSCRIPT, then sends EVAL.
	assert.EqualValues(t, 1, histogramCount(t, reg, name, map[string]string{"command": "evalsha", "outcome": "error"}))
	assert.EqualValues(t, 1, histogramCount(t, reg, name, map[string]string{"command": "eval", "outcome": "ok"}))
	assert.EqualValues(t, 1, histogramCount(t, reg, name, map[string]string{"command": "pipeline", "outcome": "ok"}))

	dials := series(t, reg, "sundial_redis_dials_total", map[string]string{"outcome": "ok"})
	require.Len(t, dials, 1)
	assert.GreaterOrEqual(t, dials[0].GetCounter().GetValue(), 1.0)
	total := series(t, reg, "sundial_redis_pool_connections", map[string]string{"client": "leases", "state": "total"})
	require.Len(t, total, 1)
	assert.GreaterOrEqual(t, total[0].GetGauge().GetValue(), 1.0)
	hits := series(t, reg, "sundial_redis_pool_hits_total", nil)
	require.Len(t, hits, 1)
	assert.Positive(t, hits[0].GetCounter().GetValue())
}

func TestInstrumentRedisTwiceWithOneNameFails(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	a := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	b := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	require.NoError(t, telemetry.InstrumentRedis(a, reg, "x"))
	assert.ErrorContains(t, telemetry.InstrumentRedis(b, reg, "x"), `redis client "x"`)
	require.NoError(t, telemetry.InstrumentRedis(b, reg, "y"))
}

func TestRedisCheck(t *testing.T) {
	t.Parallel()
	r := testenv.NeedRedis(t)
	up := redis.NewClient(&redis.Options{Addr: r.Addr})
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = up.Close(); _ = down.Close() })
	require.NoError(t, telemetry.RedisCheck(up)(t.Context()))
	assert.ErrorContains(t, telemetry.RedisCheck(down)(t.Context()), "redis: ")
}
