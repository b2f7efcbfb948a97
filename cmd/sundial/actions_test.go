package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/bench"
	"github.com/sundialhq/sundial/internal/testenv"
)

// TestOperatorCommands drives the operator commands against a registry,
// dispatcher and runner on the real stack: apply --dry-run previews a
// change and produces nothing, pause and resume change the stored
// definition (and say so when there is nothing to change), backfill
// --dry-run counts, and cancelling a run that is not running says so.
func TestOperatorCommands(t *testing.T) {
	t.Parallel()
	k := testenv.NeedKafka(t)
	c := testenv.NeedCassandra(t)
	r := testenv.NeedRedis(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	startPipeline(ctx, t, k, c, r, "actions", bench.PipelineConfig{Dispatchers: 1, Runners: 1})

	kafkaArgs := []string{"--kafka-brokers", strings.Join(k.Brokers, ","), "--topic-prefix", k.TopicPrefix}
	storeArgs := []string{"--cassandra-hosts", strings.Join(c.Hosts, ","), "--keyspace", c.Keyspace}
	both := append(append([]string{}, kafkaArgs...), storeArgs...)
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, append(args, both...)...)
	}
	write := func(name, body string) string {
		path := filepath.Join(t.TempDir(), name)
		require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
		return path
	}
	const id = "actions.nightly"
	v1 := write("v1.json", `{"id": "actions.nightly", "ownerTeam": "actions", "schedule": {"cron": {"expression": "0 3 * * *"}}, "target": {"handler": {"name": "noop"}}}`)
	v2 := write("v2.json", `{"id": "actions.nightly", "ownerTeam": "actions", "schedule": {"cron": {"expression": "*/10 * * * *"}}, "target": {"handler": {"name": "noop"}}}`)

	code, out, errOut := cli("teams", "create", "actions") // the team and its topic
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out, errOut)
	code, out, errOut = cli("jobs", "apply", "-f", v1, "--timeout", "2m")
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out, errOut)
	code, before, errOut := runCLI(t, append([]string{"jobs", "get", id}, storeArgs...)...)
	require.Equal(t, 0, code, "stderr: %s", errOut)

	code, out, errOut = cli("jobs", "apply", "--dry-run", "-f", v2)
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out, errOut)
	assert.Contains(t, out, id+"\twould be UPDATED")
	assert.Contains(t, out, `~ schedule.cron.expression: "0 3 * * *" -> "*/10 * * * *"`)
	assert.Contains(t, out, "next fires: ")
	assert.Regexp(t, `load in the next hour on shard \d: [+-]\d+ runs over \d+ minute buckets \(busiest [+-]\d+; 1 runs per occurrence\)`, out)
	assert.Contains(t, out, "dry run: 1 definitions, nothing produced")
	code, after, _ := runCLI(t, append([]string{"jobs", "get", id}, storeArgs...)...)
	require.Equal(t, 0, code)
	assert.Equal(t, before, after, "a dry run stores nothing")

	code, out, errOut = cli("jobs", "pause", id)
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out, errOut)
	assert.Contains(t, out, id+"\tUPDATED\tpaused")
	code, out, _ = runCLI(t, append([]string{"jobs", "get", id}, storeArgs...)...)
	require.Equal(t, 0, code)
	assert.Regexp(t, `"paused":\s+true`, out)
	code, out, _ = cli("jobs", "pause", id)
	require.Equal(t, 0, code)
	assert.Contains(t, out, id+"\talready paused; nothing produced")
	code, out, errOut = cli("jobs", "resume", id)
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out, errOut)
	assert.Contains(t, out, id+"\tUPDATED\tresumed")
	code, out, _ = runCLI(t, append([]string{"jobs", "get", id}, storeArgs...)...)
	require.Equal(t, 0, code)
	assert.NotContains(t, out, `"paused"`)

	code, out, errOut = cli("jobs", "backfill", id, "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-08T00:00:00Z", "--dry-run")
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out, errOut)
	assert.Contains(t, out, id+"\t7 runs from 2026-01-01T00:00:00Z to 2026-01-08T00:00:00Z (first 2026-01-01T03:00:00Z, last 2026-01-07T03:00:00Z)")
	assert.Contains(t, out, "dry run: nothing enqueued")
	code, _, errOut = cli("jobs", "backfill", id, "--from", "2026-01-08T00:00:00Z", "--to", "2026-01-01T00:00:00Z", "--policy", "weekly")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `--policy "weekly": want every or one-per-window`)
	assert.Contains(t, errOut, "must be before to")

	code, _, errOut = runCLI(t, append([]string{"runs", "cancel", id + "@1767236400000", "--redis-addr", r.Addr, "--redis-key-prefix", r.KeyPrefix}, kafkaArgs...)...)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "is not running (no runner holds its lease): nothing to cancel")
}
