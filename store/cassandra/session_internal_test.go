package cassandra

import (
	"crypto/tls"
	"testing"
	"time"

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
