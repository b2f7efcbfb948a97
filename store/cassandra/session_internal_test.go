package cassandra

import (
	"crypto/tls"
	"fmt"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClusterConfigSecurityAndRouting(t *testing.T) {
	t.Parallel()
	tlsCfg := &tls.Config{ServerName: "cassandra.internal", MinVersion: tls.VersionTLS12}
	c := Config{Hosts: []string{"h1:9142"}, Datacenter: "dc1", Username: "u", Password: "p", TLS: tlsCfg}.withDefaults()
	assert.Equal(t, "dc1", c.LocalDC, "the local DC defaults to the keyspace's")
	cluster := clusterConfig(c, time.Second)
	require.NotNil(t, cluster.SslOpts)
	assert.True(t, cluster.SslOpts.EnableHostVerification)
	assert.Equal(t, "cassandra.internal", cluster.SslOpts.ServerName)
	assert.NotSame(t, tlsCfg, cluster.SslOpts.Config, "the driver gets its own copy")
	assert.NotNil(t, cluster.Authenticator)

	c = Config{Hosts: []string{"h1"}, Datacenter: "dc1", LocalDC: "dc2"}.withDefaults()
	assert.Equal(t, "dc2", c.LocalDC)
	assert.Nil(t, clusterConfig(c, time.Second).SslOpts, "no TLS unless configured")
}

// Nodes that share an address keep every host up in the driver's eyes: its
// status events and convictions go by address alone and would take the
// live neighbours of a dead node down with it.
func TestClusterConfigNodesShareAddress(t *testing.T) {
	t.Parallel()
	for _, shared := range []bool{false, true} {
		c := Config{Hosts: []string{"127.0.0.1:24042", "127.0.0.1:24043"}, NodesShareAddress: shared}.withDefaults()
		cluster := clusterConfig(c, time.Second)
		assert.Equal(t, shared, cluster.Events.DisableNodeStatusEvents, "shared %t: status events off", shared)
		_, never := cluster.ConvictionPolicy.(neverConvict)
		assert.Equal(t, shared, never, "shared %t: no host convicted", shared)
		_, every := cluster.PoolConfig.HostSelectionPolicy.(*everyHostPolicy)
		assert.Equal(t, shared, every, "shared %t: no host removed by address", shared)
		assert.False(t, neverConvict{}.AddFailure(nil, nil))
	}
}

// everyHostPolicy forgets no host: removing or downing one (by the address
// the nodes share) leaves all of them to pick, each once per query.
func TestEveryHostPolicyForgetsNoHost(t *testing.T) {
	t.Parallel()
	p := &everyHostPolicy{}
	var hosts []*gocql.HostInfo
	for i := range 3 {
		h := &gocql.HostInfo{}
		h.SetHostID(fmt.Sprintf("node-%d", i))
		hosts = append(hosts, h)
		p.AddHost(h)
	}
	p.AddHost(hosts[1]) // again: no second entry
	p.HostDown(hosts[0])
	p.RemoveHost(hosts[2])
	for range 4 {
		next := p.Pick(nil)
		seen := map[string]int{}
		for sh := next(); sh != nil; sh = next() {
			seen[sh.Info().HostID()]++
		}
		assert.Equal(t, map[string]int{"node-0": 1, "node-1": 1, "node-2": 1}, seen)
	}
}
