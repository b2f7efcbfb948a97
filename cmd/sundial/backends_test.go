package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/urfave/cli/v3"
)

// TestBackendFlagsComeAsAWhole checks that every command reaching a backend
// takes all of its connection flags, from backends.go: one with
// --kafka-brokers but no --kafka-sasl-mechanism could not reach a secured
// cluster.
func TestBackendFlagsComeAsAWhole(t *testing.T) {
	t.Parallel()
	// bench drives the local stack it measures, in a namespace of its own,
	// and starts subprocesses with plain addresses; it does not reach
	// secured backends.
	exempt := func(path string) bool { return path == "bench" || strings.HasPrefix(path, "bench ") }
	groups := map[string][]cli.Flag{
		"kafka-brokers":   kafkaConnFlags(),
		"cassandra-hosts": cassandraStoreFlags(),
		"redis-addr":      redisFlags(),
	}
	checked := map[string]int{}
	walkPaths(newApp(&bytes.Buffer{}, &bytes.Buffer{}), func(cmd *cli.Command, path string) {
		if exempt(path) {
			return
		}
		var names []string
		for _, f := range cmd.Flags {
			names = append(names, f.Names()[0])
		}
		for marker, group := range groups {
			if !slices.Contains(names, marker) {
				continue
			}
			checked[marker]++
			for _, f := range group {
				assert.Contains(t, names, f.Names()[0], "sundial %s has --%s but not --%s", path, marker, f.Names()[0])
			}
		}
	})
	// The commands that reach each backend today: if one of these drops,
	// a command lost its flags rather than its backend.
	assert.GreaterOrEqual(t, checked["kafka-brokers"], 10, "commands with Kafka flags")
	assert.GreaterOrEqual(t, checked["cassandra-hosts"], 8, "commands with Cassandra flags")
	assert.GreaterOrEqual(t, checked["redis-addr"], 1, "commands with Redis flags")
	t.Logf("commands checked: %v", checked)
}

// TestRefusedKafkaIsNamed checks that a one-shot command against a Kafka
// that refuses its credentials ends with the reason, not with its own
// timeout, and that an invalid definition is still reported before Kafka is
// asked anything.
func TestRefusedKafkaIsNamed(t *testing.T) {
	t.Parallel()
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "sundial", "right-password"),
		kfake.SeedTopics(-1, "sundial.jobs", "sundial.jobs.ok", "sundial.triggers"))
	require.NoError(t, err)
	t.Cleanup(kc.Close)
	dir := t.TempDir()
	valid := filepath.Join(dir, "valid.json")
	require.NoError(t, os.WriteFile(valid, []byte(`{"id": "ok.job", "ownerTeam": "ok", "target": {"handler": {"name": "noop"}}, "schedule": {"interval": {"every": "60s"}, "timeZone": "UTC"}}`), 0o600))
	invalid := filepath.Join(dir, "invalid.json")
	require.NoError(t, os.WriteFile(invalid, []byte(`{"id": "bad job", "ownerTeam": "t"}`), 0o600))
	conn := []string{"--kafka-brokers", strings.Join(kc.ListenAddrs(), ","), "--kafka-sasl-mechanism", "SCRAM-SHA-256",
		"--kafka-sasl-username", "sundial", "--timeout", "10m"}
	wrong := append(slices.Clone(conn), "--kafka-sasl-password", "wrong-password")

	code, out, errOut := runCLI(t, append([]string{"jobs", "apply", "-f", valid, "--wait=false"}, wrong...)...)
	assert.Equal(t, 1, code, out)
	assert.Contains(t, errOut, "sundial: kafka: ")
	assert.NotContains(t, errOut, "deadline")

	code, _, errOut = runCLI(t, append([]string{"trigger", "ok.job", "--key", "k1"}, wrong...)...)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "sundial: kafka: ")

	code, out, errOut = runCLI(t, append([]string{"jobs", "apply", "-f", invalid}, wrong...)...)
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "bad job\tREJECTED\n", "validation comes first")
	assert.Contains(t, errOut, "1 of 1 definitions rejected", "validation comes first")

	code, out, errOut = runCLI(t, append([]string{"jobs", "apply", "-f", valid, "--wait=false", "--kafka-sasl-password", "right-password"}, conn...)...)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "ok.job\tproduced to sundial.jobs.ok", "to its owner team's topic")
}
