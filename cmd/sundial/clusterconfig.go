package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/sundialhq/sundial/internal/backoff"
	"github.com/sundialhq/sundial/store"
)

// clusterConfigReader reads the cluster config (store.Store's method).
type clusterConfigReader interface {
	GetClusterConfig(ctx context.Context) (store.ClusterConfig, error)
}

// serverClusterConfig reads the cluster config as a server starts. A store
// that does not answer (away, or just restarted and answering serial reads
// late while it replays its commit log) is asked again, with a backoff from
// 200 ms to 5 s, until ctx ends, each failure logged; an exit instead
// leaves the start to a supervisor that backs off further (a pod in
// CrashLoopBackOff waits 10 s, then 20 s, 40 s ...). In the chaos bench of
// 20261129-134747 a DAG engine restarted just after Cassandra exited four
// times in 40 s on this read. A cluster that is not initialized is an
// answer, not an outage: that error returns at once.
func serverClusterConfig(ctx context.Context, st clusterConfigReader, logger *slog.Logger) (store.ClusterConfig, error) {
	var cfg store.ClusterConfig
	err := backoff.Retry(ctx, backoff.Config{
		Min: 200 * time.Millisecond, Max: 5 * time.Second,
		Permanent: func(err error) bool { return errors.Is(err, store.ErrNotInitialized) },
		OnRetry: func(err error) {
			logger.Warn("cannot read the cluster config; trying again", "err", err)
		},
	}, func() error {
		var err error
		cfg, err = st.GetClusterConfig(ctx)
		return err
	})
	return cfg, err
}
