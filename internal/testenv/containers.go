package testenv

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tccassandra "github.com/testcontainers/testcontainers-go/modules/cassandra"
	tckafka "github.com/testcontainers/testcontainers-go/modules/kafka"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"
)

// Container images used when a Docker engine is available. They match the
// versions the local stack runs.
const (
	kafkaImage     = "apache/kafka:4.1.1"
	cassandraImage = "cassandra:5.0"
	redisImage     = "redis:7.4"
)

var errNoDocker = errors.New("no Docker engine")

// dockerAvailable reports whether a Docker engine answers. testcontainers
// panics on some broken setups; that counts as "no".
func dockerAvailable() (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	provider, err := testcontainers.ProviderDocker.GetProvider()
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return provider.Health(ctx) == nil
}

// The containers are started once per test binary and reaped by
// testcontainers when it exits (see the package documentation).
var (
	containerKafka = sync.OnceValues(func() ([]string, error) {
		if !dockerAvailable() {
			return nil, errNoDocker
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		c, err := tckafka.Run(ctx, kafkaImage, tckafka.WithClusterID("sundial-test"))
		if err != nil {
			return nil, fmt.Errorf("start kafka container: %w", err)
		}
		return c.Brokers(ctx)
	})
	containerCassandra = sync.OnceValues(func() ([]string, error) {
		if !dockerAvailable() {
			return nil, errNoDocker
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		c, err := tccassandra.Run(ctx, cassandraImage)
		if err != nil {
			return nil, fmt.Errorf("start cassandra container: %w", err)
		}
		host, err := c.ConnectionHost(ctx)
		if err != nil {
			return nil, err
		}
		return []string{host}, nil
	})
	containerRedis = sync.OnceValues(func() (string, error) {
		if !dockerAvailable() {
			return "", errNoDocker
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		c, err := tcredis.Run(ctx, redisImage)
		if err != nil {
			return "", fmt.Errorf("start redis container: %w", err)
		}
		return c.Endpoint(ctx, "")
	})
)
