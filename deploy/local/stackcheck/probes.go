package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gocql/gocql"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kafkaProbe is probeKafka wanting at least brokers brokers in the
// metadata: a node of a cluster is ready once the cluster has every broker.
func kafkaProbe(brokers int, sec security) probeFunc {
	return func(ctx context.Context, addr string) (string, error) {
		return probeKafka(ctx, addr, brokers, sec)
	}
}

// probeKafka asks the broker for cluster metadata with a fresh client, so
// nothing cached from an earlier attempt can hide a broker that went away.
func probeKafka(ctx context.Context, addr string, brokers int, sec security) (string, error) {
	opts, err := sec.kafkaOpts(addr)
	if err != nil {
		return "", err
	}
	cl, err := kgo.NewClient(append(opts,
		kgo.DialTimeout(2*time.Second),
		kgo.RequestRetries(0),
	)...)
	if err != nil {
		return "", fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		return "", fmt.Errorf("metadata request: %w", err)
	}
	if len(md.Brokers) < brokers {
		return "", fmt.Errorf("metadata lists %d broker(s), want %d", len(md.Brokers), brokers)
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
// cassandraProbe wants the node bootstrapped and, with nodes above 1, a
// member of a ring of at least that many nodes (its system.peers_v2 lists
// the others).
func cassandraProbe(nodes int, sec security) probeFunc {
	return func(ctx context.Context, addr string) (string, error) {
		return probeCassandra(ctx, addr, nodes, sec)
	}
}

func probeCassandra(ctx context.Context, addr string, nodes int, sec security) (string, error) {
	cluster := newCassandraCluster(addr)
	if err := sec.cassandra(cluster); err != nil {
		return "", err
	}
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
	if nodes <= 1 {
		return "version " + version, nil
	}
	// Counted here rather than with count(*), which the node logs a
	// warning for (an aggregate without a partition key).
	iter := session.Query("SELECT peer FROM system.peers_v2").WithContext(ctx).Iter()
	peers := iter.NumRows()
	if err := iter.Close(); err != nil {
		return "", fmt.Errorf("read system.peers_v2: %w", err)
	}
	if peers+1 < nodes {
		return "", fmt.Errorf("the ring has %d nodes, want %d", peers+1, nodes)
	}
	return fmt.Sprintf("version %s, ring of %d nodes", version, peers+1), nil
}

// newCassandraCluster is the configuration of a short-lived session with the
// one node at addr.
func newCassandraCluster(addr string) *gocql.ClusterConfig {
	cluster := gocql.NewCluster(addr)
	cluster.ProtoVersion = 4
	cluster.ConnectTimeout = 2 * time.Second
	cluster.Timeout = 5 * time.Second
	cluster.NumConns = 1
	cluster.DisableInitialHostLookup = true
	cluster.Logger = log.New(io.Discard, "", 0)
	return cluster
}

// redisProbe is probeRedis, followed for a cluster node (masters > 0) by
// probeRedisCluster.
func redisProbe(masters int, sec security) probeFunc {
	return func(ctx context.Context, addr string) (string, error) {
		detail, err := probeRedis(ctx, addr, sec)
		if err != nil || masters == 0 {
			return detail, err
		}
		shape, err := probeRedisCluster(ctx, addr, masters, sec)
		if err != nil {
			return "", err
		}
		return detail + ", " + shape, nil
	}
}

// probeRedisCluster reads the node's view of the cluster: CLUSTER INFO must
// say the state is ok with every slot served, and CLUSTER NODES must list
// the given number of masters, each with a replica that this node sees
// connected on the cluster bus.
// It names the node's own role. sec logs in as probeRedis does, so a
// secured cluster is read over TLS as its ACL user.
func probeRedisCluster(ctx context.Context, addr string, masters int, sec security) (string, error) {
	tlsConfig, user, pass, err := sec.redis()
	if err != nil {
		return "", err
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: tlsConfig, Username: user, Password: pass,
		DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second,
		MaxRetries: -1, PoolSize: 1, Protocol: 2, DisableIdentity: true})
	defer func() { _ = rdb.Close() }()
	info, err := rdb.ClusterInfo(ctx).Result()
	if err != nil {
		return "", fmt.Errorf("cluster info: %w", err)
	}
	fields := map[string]string{}
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	if fields["cluster_state"] != "ok" || fields["cluster_slots_ok"] != "16384" {
		return "", fmt.Errorf("cluster_state %s, %s of 16384 slots ok", cmp.Or(fields["cluster_state"], "?"), cmp.Or(fields["cluster_slots_ok"], "?"))
	}
	nodes, err := rdb.ClusterNodes(ctx).Result()
	if err != nil {
		return "", fmt.Errorf("cluster nodes: %w", err)
	}
	shape, err := clusterShape(nodes)
	if err != nil {
		return "", err
	}
	if len(shape.masters) != masters {
		return "", fmt.Errorf("%d masters with slots, want %d", len(shape.masters), masters)
	}
	for id, replicas := range shape.masters {
		if replicas == 0 {
			return "", fmt.Errorf("master %s has no connected replica", id)
		}
	}
	return fmt.Sprintf("cluster ok, %d masters, this node a %s", masters, shape.self), nil
}

// redisClusterShape is what clusterShape reads from CLUSTER NODES.
type redisClusterShape struct {
	masters map[string]int // master id -> its replicas seen connected; masters serving slots only
	self    string         // "master" or "replica"
}

// clusterShape parses CLUSTER NODES: "<id> <addr> <flags> <master-id>
// <ping> <pong> <epoch> <link> <slot>...", one node a line.
func clusterShape(nodes string) (redisClusterShape, error) {
	shape := redisClusterShape{masters: map[string]int{}}
	type replica struct{ master, link string }
	var replicas []replica
	for line := range strings.Lines(nodes) {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		flags := strings.Split(f[2], ",")
		if slices.Contains(flags, "myself") {
			shape.self = "master"
			if slices.Contains(flags, "slave") {
				shape.self = "replica"
			}
		}
		if slices.Contains(flags, "fail") || slices.Contains(flags, "noaddr") {
			continue
		}
		switch {
		case slices.Contains(flags, "master") && len(f) > 8:
			if _, ok := shape.masters[f[0]]; !ok {
				shape.masters[f[0]] = 0
			}
		case slices.Contains(flags, "slave"):
			replicas = append(replicas, replica{master: f[3], link: f[7]})
		}
	}
	for _, r := range replicas {
		if _, ok := shape.masters[r.master]; ok && r.link == "connected" {
			shape.masters[r.master]++
		}
	}
	if shape.self == "" {
		return shape, errors.New("cluster nodes: no line for this node")
	}
	return shape, nil
}

// probeRedis sends PING, which fails with LOADING while Redis replays its
// append-only file, then reads the version from INFO.
func probeRedis(ctx context.Context, addr string, sec security) (string, error) {
	tlsConfig, user, pass, err := sec.redis()
	if err != nil {
		return "", err
	}
	rdb := redis.NewClient(&redis.Options{
		Addr:            addr,
		TLSConfig:       tlsConfig,
		Username:        user,
		Password:        pass,
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
