package main

import (
	"bytes"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/store/cassandra"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(t.Context(), append([]string{"sundial"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	cass := testenv.NeedCassandra(t)
	kafka := testenv.NeedKafka(t)
	args := []string{"migrate",
		"--cassandra-hosts", strings.Join(cass.Hosts, ","), "--keyspace", cass.Keyspace,
		"--kafka-brokers", strings.Join(kafka.Brokers, ","), "--topic-prefix", kafka.TopicPrefix,
		"--topic-replication-factor", "1", "--teams", "team-a", "--shards", "8", "--timeout", "2m",
	}
	code, out, errOut := runCLI(t, args...)
	require.Equal(t, 0, code, "stderr: %s", errOut)
	assert.Contains(t, out, fmt.Sprintf("schema version %d (keyspace created, applied [1", cassandra.SchemaVersion()))
	assert.Contains(t, out, "cluster: 8 shards")
	assert.Regexp(t, `topic \S+sundial\.shards\s+8 partitions  created`, out)
	assert.Regexp(t, `topic \S+sundial\.executors\s+4 partitions  created`, out)
	assert.Regexp(t, `topic \S+sundial\.jobs\.team-a\s+16 partitions  created`, out)
	assert.Regexp(t, `topic \S+sundial\.audit\s+4 partitions  created`, out)
	assert.Equal(t, 12, strings.Count(out, "created\n"), out)

	code, out, errOut = runCLI(t, args...)
	require.Equal(t, 0, code, "re-running is safe; stderr: %s", errOut)
	assert.Contains(t, out, "(up to date)")
	assert.Equal(t, 12, strings.Count(out, "exists\n"), out)
	assert.NotContains(t, out, "created")

	args[len(args)-3] = "16" // --shards
	code, _, errOut = runCLI(t, args...)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "initialised with 8 shards, 16 requested")
}

// Not parallel: it clears the environment the stack exports.
func TestMigrateBadInput(t *testing.T) {
	t.Setenv("SUNDIAL_CASSANDRA_HOSTS", "")
	t.Setenv("SUNDIAL_KAFKA_BROKERS", "")
	code, _, errOut := runCLI(t, "migrate", "--shards", "0", "--replication-factor", "0", "--topic-replication-factor", "0")
	assert.Equal(t, 1, code)
	for _, want := range []string{"--shards 0", "--kafka-brokers", "--cassandra-hosts", "--replication-factor 0", "--topic-replication-factor 0"} {
		assert.Contains(t, errOut, want)
	}

	code, _, errOut = runCLI(t, "migrate", "--cassandra-hosts", "db:70000", "--kafka-brokers", "k:9092", "--keyspace", "bad-name")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "hosts")
	assert.Contains(t, errOut, "keyspace")
}

// Not parallel: it sets the environment.
func TestMigrateUnreachableCassandra(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())

	t.Setenv("SUNDIAL_CASSANDRA_HOSTS", addr) // through the environment, as the stack exports it
	start := time.Now()
	code, _, errOut := runCLI(t, "migrate", "--kafka-brokers", "127.0.0.1:1", "--timeout", "3s")
	took := time.Since(start)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "cassandra unreachable")
	assert.Contains(t, errOut, addr)
	assert.Less(t, took, 4*time.Second)
}
