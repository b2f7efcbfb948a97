package cassandra

import (
	"context"
	"fmt"

	"github.com/sundialhq/sundial/store"
)

// SetupResult says what Setup did.
type SetupResult struct {
	Migrate MigrateResult
	// Cluster is the stored cluster config, new or existing.
	Cluster store.ClusterConfig
}

// Setup prepares a cluster: Migrate, then store the shard count with
// InitCluster. Safe to re-run; a shard count other than the stored one is an
// error (errors.Is store.ErrShardCountMismatch) and changes nothing.
func Setup(ctx context.Context, c Config, shards int) (SetupResult, error) {
	var res SetupResult
	if shards <= 0 {
		return res, fmt.Errorf("setup: %w: shards %d: must be positive", store.ErrInvalid, shards)
	}
	m, err := Migrate(ctx, c)
	if err != nil {
		return res, err
	}
	res.Migrate = m
	s, err := Open(ctx, c)
	if err != nil {
		return res, err
	}
	defer func() { _ = s.Close() }()
	cfg, err := s.InitCluster(ctx, shards)
	if err != nil {
		return res, err
	}
	res.Cluster = cfg
	return res, nil
}
