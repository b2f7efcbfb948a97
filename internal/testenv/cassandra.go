package testenv

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"
)

// Cassandra is a test's view of a Cassandra cluster.
type Cassandra struct {
	// Hosts are contact points (host or host:port).
	Hosts []string
	// Keyspace is a name no other test uses. It is not created here: the test
	// creates it (normally through the store's migration); it is dropped at
	// cleanup.
	Keyspace string
}

// NeedCassandra returns a reachable Cassandra and a keyspace name of the
// test's own.
func NeedCassandra(t testing.TB) Cassandra {
	t.Helper()
	skipShort(t, "Cassandra")
	hosts := addresses(EnvCassandra)
	if len(hosts) == 0 {
		var err error
		hosts, err = containerCassandra()
		if err != nil {
			unavailable(t, "Cassandra", EnvCassandra, err.Error())
		}
	}
	return cassandraAt(t, hosts, false, howToStart)
}

// cassandraAt returns the Cassandra at hosts and a keyspace name of the
// test's own, dropped at cleanup; how says how to start it. sharedAddress
// says the nodes share one IP address (the local cluster): the session
// then ignores the nodes' status events and never marks a host down, as
// the store does with NodesShareAddress, since the driver tells nodes
// apart by address alone.
func cassandraAt(t testing.TB, hosts []string, sharedAddress bool, how string) Cassandra {
	t.Helper()
	sess, err := cassandraSession(hosts, sharedAddress)
	if err != nil {
		t.Fatalf("cassandra at %v does not accept CQL: %v (%s)", hosts, err, how)
	}
	// Keyspace names are limited to 48 characters of [a-zA-Z0-9_].
	c := Cassandra{Hosts: hosts, Keyspace: fmt.Sprintf("t_%s_%s", slug(t.Name(), 30), randomSuffix())}
	t.Cleanup(func() {
		defer sess.Close()
		if err := sess.Query("DROP KEYSPACE IF EXISTS " + c.Keyspace).Exec(); err != nil {
			t.Logf("cleanup: drop keyspace %s: %v", c.Keyspace, err)
		}
	})
	return c
}

func cassandraSession(hosts []string, sharedAddress bool) (*gocql.Session, error) {
	cluster := gocql.NewCluster(hosts...)
	if sharedAddress {
		cluster.Events.DisableNodeStatusEvents = true
		cluster.ConvictionPolicy = neverConvict{}
		// A killed node's pool is refilled on a later pick; a refill that
		// fails must not sleep a second between attempts, or it outlives
		// the session and goleak reports it.
		cluster.ReconnectionPolicy = &gocql.ConstantReconnectionPolicy{MaxRetries: 1, Interval: 100 * time.Millisecond}
	}
	cluster.Timeout = connectTimeout
	cluster.ConnectTimeout = 10 * time.Second
	// Schema changes (keyspace drops) wait for agreement; one node agrees fast.
	cluster.MaxWaitSchemaAgreement = 30 * time.Second
	for _, h := range hosts {
		// gocql takes the port from the cluster config, not from host:port
		// contact points, when they disagree with the default; keep both right.
		if i := strings.LastIndexByte(h, ':'); i > 0 {
			var port int
			if _, err := fmt.Sscanf(h[i+1:], "%d", &port); err == nil {
				cluster.Port = port
			}
		}
	}
	return cluster.CreateSession()
}

// neverConvict keeps every host up in the driver's eyes.
type neverConvict struct{}

func (neverConvict) AddFailure(error, *gocql.HostInfo) bool { return false }
func (neverConvict) Reset(*gocql.HostInfo)                  {}
