package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// redisClient returns a client of the Redis that addrs (comma-separated
// host:port) names: one node, or a Redis Cluster when cluster is set or
// addrs lists several nodes. A cluster's addresses are seeds: the client
// reads the slot map from them and follows failovers by itself. poolSize
// bounds the connections to each node.
func redisClient(addrs string, cluster bool, poolSize int) (redis.UniversalClient, error) {
	if strings.TrimSpace(addrs) == "" {
		return nil, errors.New("--redis-addr: required (or SUNDIAL_REDIS_ADDR)")
	}
	var list []string
	for a := range strings.SplitSeq(addrs, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			return nil, fmt.Errorf("--redis-addr %q: an empty address in the list", addrs)
		}
		list = append(list, a)
	}
	return redis.NewUniversalClient(&redis.UniversalOptions{Addrs: list, IsClusterMode: cluster, PoolSize: poolSize}), nil
}
