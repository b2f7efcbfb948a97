package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Environment variables of the local clusters (deploy/local/cluster.sh env
// exports them).
const (
	// EnvKafkaCluster lists the brokers of a Kafka cluster, kafka-1 first.
	EnvKafkaCluster = "SUNDIAL_KAFKA_CLUSTER_BROKERS"
	// EnvRedisCluster lists the nodes of a Redis Cluster, redis-1 first.
	EnvRedisCluster = "SUNDIAL_REDIS_CLUSTER_ADDRS"
	// EnvCassandraCluster lists the nodes of the three-node Cassandra,
	// cassandra-1 first.
	EnvCassandraCluster = "SUNDIAL_CASSANDRA_CLUSTER_HOSTS"
	// EnvClusterCtl is the cluster.sh that kills and starts their nodes.
	EnvClusterCtl = "SUNDIAL_CLUSTER_CTL"
)

const howToStartCluster = "run `make test-cluster`, or start the clusters with `deploy/local/cluster.sh up` " +
	"and `source <(deploy/local/cluster.sh env)`"

// clusterUnavailable fails the test. The tests that need the clusters are
// behind the cluster build tag, so they only exist when asked for (make
// test-cluster), and then a missing cluster is a failure, never a skip.
func clusterUnavailable(t testing.TB, what, env string) {
	t.Helper()
	t.Fatalf("needs the local %s: %s is unset; %s", what, env, howToStartCluster)
}

// NeedKafkaCluster returns the local Kafka cluster (at least three brokers)
// and a topic prefix of the test's own. Brokers[i] is node kafka-<i+1>,
// whose broker id is i+1.
func NeedKafkaCluster(t testing.TB) Kafka {
	t.Helper()
	skipShort(t, "the Kafka cluster")
	brokers := addresses(EnvKafkaCluster)
	if len(brokers) == 0 {
		clusterUnavailable(t, "Kafka cluster", EnvKafkaCluster)
	}
	if len(brokers) < 3 {
		t.Fatalf("%s lists %d brokers, want 3: %v", EnvKafkaCluster, len(brokers), brokers)
	}
	return newKafka(t, brokers)
}

// NeedCassandraCluster returns the local three-node Cassandra and a keyspace
// name of the test's own (dropped at cleanup). Hosts[i] is node
// cassandra-<i+1>; the nodes share 127.0.0.1 and differ by port.
func NeedCassandraCluster(t testing.TB) Cassandra {
	t.Helper()
	skipShort(t, "the Cassandra cluster")
	hosts := addresses(EnvCassandraCluster)
	if len(hosts) == 0 {
		clusterUnavailable(t, "Cassandra cluster", EnvCassandraCluster)
	}
	if len(hosts) < 3 {
		t.Fatalf("%s lists %d nodes, want 3: %v", EnvCassandraCluster, len(hosts), hosts)
	}
	return cassandraAt(t, hosts, true, howToStartCluster)
}

// RedisCluster is a test's view of a Redis Cluster.
type RedisCluster struct {
	// Addrs are the nodes' addresses; Addrs[i] is node redis-<i+1>.
	Addrs []string
	// KeyPrefix is prepended to every key the test writes; keys with it are
	// deleted at cleanup. It holds no hash tag.
	KeyPrefix string
}

// NeedRedisCluster returns the local Redis Cluster and a key prefix of the
// test's own.
func NeedRedisCluster(t testing.TB) RedisCluster {
	t.Helper()
	skipShort(t, "the Redis Cluster")
	addrs := addresses(EnvRedisCluster)
	if len(addrs) == 0 {
		clusterUnavailable(t, "Redis Cluster", EnvRedisCluster)
	}
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	ctx, cancel := timeoutCtx()
	defer cancel()
	if err := client.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error { return c.Ping(ctx).Err() }); err != nil {
		_ = client.Close()
		t.Fatalf("redis cluster at %v does not answer PING on every node: %v (%s)", addrs, err, howToStartCluster)
	}
	r := RedisCluster{Addrs: addrs, KeyPrefix: fmt.Sprintf("t:%s:%s:", slug(t.Name(), 20), randomSuffix())}
	t.Cleanup(func() {
		defer func() { _ = client.Close() }()
		ctx, cancel := timeoutCtx()
		defer cancel()
		// Keys of one prefix spread over every master; each master deletes
		// its own, one key a command (keys of different slots cannot share
		// one).
		err := client.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			iter := c.Scan(ctx, 0, r.KeyPrefix+"*", 1000).Iterator()
			pipe := c.Pipeline()
			for iter.Next(ctx) {
				pipe.Unlink(ctx, iter.Val())
			}
			if err := iter.Err(); err != nil {
				return err
			}
			if pipe.Len() == 0 {
				return nil
			}
			_, err := pipe.Exec(ctx)
			return err
		})
		if err != nil {
			t.Logf("cleanup: delete %s* on the cluster: %v", r.KeyPrefix, err)
		}
	})
	return r
}

// Cluster kills and starts nodes of the local clusters through cluster.sh,
// for failure tests. Its calls are serialised: cluster.sh takes a lock.
type Cluster struct {
	ctl string
	mu  *sync.Mutex
}

// NeedCluster returns the controller of the local clusters.
func NeedCluster(t testing.TB) Cluster {
	t.Helper()
	skipShort(t, "the local clusters")
	ctl := os.Getenv(EnvClusterCtl)
	if ctl == "" {
		clusterUnavailable(t, "clusters' control script", EnvClusterCtl)
	}
	return Cluster{ctl: ctl, mu: &sync.Mutex{}}
}

// Kill sends SIGKILL to node (kafka-1..3, redis-1..6, cassandra-1..3) and
// returns once it has exited.
func (c Cluster) Kill(t testing.TB, node string) {
	t.Helper()
	c.run(t, 30*time.Second, "kill", node)
}

// Start starts node again and returns once it serves requests and the
// cluster has its full shape again (three brokers; three masters with a
// replica each; a ring of three Cassandra nodes).
func (c Cluster) Start(t testing.TB, node string) {
	t.Helper()
	c.run(t, 5*time.Minute, "start", node)
}

func (c Cluster) run(t testing.TB, limit time.Duration, args ...string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	out, err := exec.CommandContext(ctx, c.ctl, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", c.ctl, strings.Join(args, " "), err, out)
	}
	t.Logf("%s %s: %s", c.ctl, strings.Join(args, " "), strings.TrimSpace(string(out)))
}
