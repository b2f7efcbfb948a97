package main

import (
	"bytes"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
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
	exempt := map[string]bool{"bench": true}
	groups := map[string][]cli.Flag{
		"kafka-brokers":   kafkaConnFlags(),
		"cassandra-hosts": cassandraStoreFlags(),
		"redis-addr":      redisFlags(),
	}
	checked := map[string]int{}
	walkPaths(newApp(&bytes.Buffer{}, &bytes.Buffer{}), func(cmd *cli.Command, path string) {
		if exempt[path] {
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
