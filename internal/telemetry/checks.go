package telemetry

import (
	"context"
	"errors"
	"fmt"

	"github.com/gocql/gocql"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
)

// KafkaCheck is ready when the client reaches a broker (kgo.Client.Ping: a
// metadata request to any broker).
func KafkaCheck(client *kgo.Client) Check {
	return func(ctx context.Context) error {
		if err := client.Ping(ctx); err != nil {
			return fmt.Errorf("kafka: %w", err)
		}
		return nil
	}
}

// RedisCheck is ready when Redis answers PING.
func RedisCheck(client redis.UniversalClient) Check {
	return func(ctx context.Context) error {
		if err := client.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("redis: %w", err)
		}
		return nil
	}
}

// CassandraCheck is ready when a coordinator answers a read of system.local
// (no keyspace of Sundial's is touched, so it also holds before migrations).
func CassandraCheck(session *gocql.Session) Check {
	return func(ctx context.Context) error {
		var v string
		if err := session.Query(`SELECT release_version FROM system.local`).WithContext(ctx).Scan(&v); err != nil {
			return fmt.Errorf("cassandra: %w", err)
		}
		return nil
	}
}

// ErrNoShards is the error of ShardsCheck when the dispatcher owns no shard.
var ErrNoShards = errors.New("owns no shards")

// ShardsCheck is a dispatcher's readiness: ready while it owns at least one
// shard. owned returns the shards owned now (dispatcher.Dispatcher.Owned).
// A dispatcher that joined a group with more members than shards is idle
// and reported not ready, which is the truth: it dispatches nothing.
func ShardsCheck(owned func() []int) Check {
	return func(context.Context) error {
		if len(owned()) == 0 {
			return ErrNoShards
		}
		return nil
	}
}
