package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/gocql/gocql"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// probeKafka asks the broker for cluster metadata with a fresh client, so
// nothing cached from an earlier attempt can hide a broker that went away.
func probeKafka(ctx context.Context, addr string) (string, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.DialTimeout(2*time.Second),
		kgo.RequestRetries(0),
	)
	if err != nil {
		return "", fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		return "", fmt.Errorf("metadata request: %w", err)
	}
	if len(md.Brokers) == 0 {
		return "", errors.New("metadata lists no broker yet")
	}
	if md.Controller < 0 {
		return "", errors.New("no active controller yet")
	}
	var advertised []string
	for _, b := range md.Brokers {
		a := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		if a == addr {
			return fmt.Sprintf("cluster %s, %d broker(s), controller %d", md.Cluster, len(md.Brokers), md.Controller), nil
		}
		advertised = append(advertised, a)
	}
	return "", fmt.Errorf("no broker advertises %s (brokers: %s): check advertised.listeners", addr, strings.Join(advertised, ", "))
}

// probeCassandra opens a CQL session and reads system.local: the native
// transport opens late in startup, and bootstrapped must be COMPLETED before
// schema changes are safe.
func probeCassandra(ctx context.Context, addr string) (string, error) {
	cluster := gocql.NewCluster(addr)
	cluster.ProtoVersion = 4
	cluster.ConnectTimeout = 2 * time.Second
	cluster.Timeout = 5 * time.Second
	cluster.NumConns = 1
	cluster.DisableInitialHostLookup = true
	cluster.Logger = log.New(io.Discard, "", 0)
	session, err := cluster.CreateSession()
	if err != nil {
		return "", fmt.Errorf("cql session: %w", err)
	}
	defer session.Close()
	var bootstrapped, version string
	err = session.Query("SELECT bootstrapped, release_version FROM system.local WHERE key = 'local'").
		WithContext(ctx).Scan(&bootstrapped, &version)
	if err != nil {
		return "", fmt.Errorf("read system.local: %w", err)
	}
	if bootstrapped != "COMPLETED" {
		return "", fmt.Errorf("bootstrapped = %q, want COMPLETED", bootstrapped)
	}
	return "version " + version, nil
}

// probeRedis sends PING, which fails with LOADING while Redis replays its
// append-only file, then reads the version from INFO.
func probeRedis(ctx context.Context, addr string) (string, error) {
	rdb := redis.NewClient(&redis.Options{
		Addr:            addr,
		DialTimeout:     2 * time.Second,
		ReadTimeout:     2 * time.Second,
		WriteTimeout:    2 * time.Second,
		MaxRetries:      -1,
		DialerRetries:   1,
		PoolSize:        1,
		Protocol:        2,
		DisableIdentity: true,
	})
	defer func() { _ = rdb.Close() }()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return "", fmt.Errorf("ping: %w", err)
	}
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return "", fmt.Errorf("info: %w", err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return "version " + v, nil
		}
	}
	return "version unknown", nil
}
