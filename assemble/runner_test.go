package assemble_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/assemble"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/leasing"
	"github.com/sundialhq/sundial/quota"
	"github.com/sundialhq/sundial/runner"
	"github.com/sundialhq/sundial/store"
)

type enqueuer struct{}

func (enqueuer) Enqueue(context.Context, ...store.DueEntry) error { return nil }

func settings() runner.Config {
	return runner.Config{ID: "r1", Kafka: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, Topics: topics.Names{Prefix: "t."},
		Logger: slog.New(slog.DiscardHandler)}
}

// The backend fields come from RunnerBackends only: a caller that builds
// one its own way is refused, naming every such field.
func TestRunnerRefusesBackendFieldsSetByTheCaller(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{})
	t.Cleanup(func() { _ = rdb.Close() })
	leases, err := leasing.New(leasing.Config{Client: rdb})
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		set  func(*runner.Config)
		want string
	}{
		{"leases", func(c *runner.Config) { c.Leases = leases }, "Leases"},
		{"redis", func(c *runner.Config) { c.Redis = rdb }, "Redis"},
		{"key prefix", func(c *runner.Config) { c.KeyPrefix = "x:" }, "KeyPrefix"},
		{"enqueuer", func(c *runner.Config) { c.Enqueuer = enqueuer{} }, "Enqueuer"},
		{"quotas", func(c *runner.Config) { c.TeamQuotas = quota.NewCache(quota.NewMemory(), 0, nil) }, "TeamQuotas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := settings()
			tc.set(&cfg)
			err := assemble.CheckRunner(cfg, assemble.RunnerBackends{})
			require.Error(t, err)
			assert.ErrorContains(t, err, tc.want)
			_, err = assemble.Runner(t.Context(), cfg, assemble.RunnerBackends{Redis: rdb, Enqueuer: enqueuer{}})
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

// CheckRunner reports bad settings without any backend, all at once.
func TestCheckRunnerNeedsNoBackend(t *testing.T) {
	t.Parallel()
	require.NoError(t, assemble.CheckRunner(settings(), assemble.RunnerBackends{}))
	cfg := settings()
	cfg.Concurrency = -1
	err := assemble.CheckRunner(cfg, assemble.RunnerBackends{LeaseTTL: -1})
	require.Error(t, err)
	assert.ErrorContains(t, err, "TTL: -1ns")
	assert.ErrorContains(t, err, "Concurrency")
}

// A runner built with quotas exports the teams' quota usage on its
// registerer, and its Redis keys start with the installation's prefix.
func TestRunnerIsBuiltFromItsBackends(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	q := quota.NewMemory()
	require.NoError(t, q.SetQuota(t.Context(), quota.Quota{Team: "payments", MaxJobs: 3}))
	reg := prometheus.NewRegistry()
	cfg := settings()
	cfg.Registerer = reg
	r, err := assemble.Runner(t.Context(), cfg, assemble.RunnerBackends{Redis: rdb, RedisKeyPrefix: "inst:", Enqueuer: enqueuer{}, Quotas: q})
	require.NoError(t, err)
	require.NotNil(t, r)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	assert.Contains(t, names, "sundial_quota_limit", "the quota usage is exported")

	without := settings()
	without.Registerer = prometheus.NewRegistry()
	_, err = assemble.Runner(t.Context(), without, assemble.RunnerBackends{Redis: rdb, Enqueuer: enqueuer{}})
	require.NoError(t, err, "checkpoints and quotas are optional")
}
