package main

import (
	"context"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/internal/connect"
)

// redisClient returns a client of the Redis that redisFlags name: one node,
// a Redis Cluster when --redis-cluster is set or --redis-addr lists several
// nodes, or the master that --redis-sentinel-master names. A cluster's
// addresses are seeds: the client reads the slot map from them and follows
// failovers by itself. poolSize bounds the connections to each node.
func redisClient(cmd *cli.Command, poolSize int) (redis.UniversalClient, error) {
	r, err := redisSettings(cmd, poolSize)
	if err != nil {
		return nil, err
	}
	return r.Client()
}

// checkRedis fails, within connectTimeout, with the server's answer
// (WRONGPASS, NOPERM) or the TLS cause when Redis refuses the connection.
func checkRedis(ctx context.Context, c redis.UniversalClient) error {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	return connect.PingRedis(ctx, c)
}

// kafkaAndRedis returns the Kafka options and a small Redis client of the
// operator commands that signal runners; the caller closes the client.
func kafkaAndRedis(cmd *cli.Command) ([]kgo.Opt, redis.UniversalClient, error) {
	kopts, err := kafkaOptions(cmd)
	if err != nil {
		return nil, nil, err
	}
	rdb, err := redisClient(cmd, 4)
	if err != nil {
		return nil, nil, err
	}
	return kopts, rdb, nil
}
