package main

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/bench"
	"github.com/sundialhq/sundial/internal/testenv"
)

// startPipeline makes the namespace id (4 shards) in the test's own
// namespaces of the real stack (k, c, r) and starts on it an in-process
// pipeline of cfg's components, cfg's Backends and Namespace filled in and
// its Logger, when nil, discarding. The pipeline is stopped at cleanup.
func startPipeline(ctx context.Context, t *testing.T, k testenv.Kafka, c testenv.Cassandra, r testenv.Redis, id string, cfg bench.PipelineConfig) (*bench.InProcess, bench.Namespace) {
	t.Helper()
	cfg.Namespace = bench.Namespace{ID: id, TopicPrefix: k.TopicPrefix, Keyspace: c.Keyspace, RedisPrefix: r.KeyPrefix}
	cfg.Backends = bench.Backends{Brokers: k.Brokers, CassandraHosts: c.Hosts, RedisAddr: r.Addr}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	require.NoError(t, cfg.Namespace.Setup(ctx, cfg.Backends, 4))
	pl := bench.NewInProcess(cfg)
	require.NoError(t, pl.Start(ctx))
	t.Cleanup(pl.Stop)
	return pl, cfg.Namespace
}
