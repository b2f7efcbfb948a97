package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/bench"
	"github.com/sundialhq/sundial/internal/testenv"
)

// TestNewcomerJobsFire applies what a newcomer writes first, an interval job
// without a time zone and a cron job without a time zone or DST policy,
// to a registry, dispatcher and runner on the real stack, and follows each
// to a finished run with `sundial events tail`.
func TestNewcomerJobsFire(t *testing.T) {
	t.Parallel()
	k := testenv.NeedKafka(t)
	c := testenv.NeedCassandra(t)
	r := testenv.NeedRedis(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()

	// The testenv names are the test's own and are removed at cleanup.
	startPipeline(ctx, t, k, c, r, "newcomer", bench.PipelineConfig{Dispatchers: 1, Runners: 1})

	file := filepath.Join(t.TempDir(), "jobs.json")
	require.NoError(t, os.WriteFile(file, []byte(`[
		{"id": "newcomer.every-second", "ownerTeam": "newcomer", "schedule": {"interval": {"every": "1s"}},
		 "target": {"handler": {"name": "noop"}}},
		{"id": "newcomer.cron", "ownerTeam": "newcomer", "schedule": {"cron": {"expression": "* * * * * *"}},
		 "target": {"handler": {"name": "noop"}}}
	]`), 0o600))
	kafkaArgs := []string{"--kafka-brokers", strings.Join(k.Brokers, ","), "--topic-prefix", k.TopicPrefix}
	// The README's first step for a team: its record and its topic.
	code, out, errOut := runCLI(t, append([]string{"teams", "create", "newcomer", "--cassandra-hosts", strings.Join(c.Hosts, ","), "--keyspace", c.Keyspace}, kafkaArgs...)...)
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out, errOut)
	code, out, errOut = runCLI(t, append([]string{"jobs", "apply", "-f", file, "--timeout", "2m"}, kafkaArgs...)...)
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out, errOut)
	assert.Contains(t, out, "newcomer.every-second\tCREATED")
	assert.Contains(t, out, "newcomer.cron\tCREATED")

	for _, job := range []string{"newcomer.every-second", "newcomer.cron"} {
		// Follow the job's events until one of its runs succeeded.
		tailCtx, stop := context.WithCancel(ctx)
		out := &untilWriter{want: "SUCCEEDED", found: stop}
		app := newApp(&strings.Builder{}, &strings.Builder{})
		var stderr strings.Builder
		app.Writer, app.ErrWriter = out, &stderr
		err := app.Run(tailCtx, append([]string{"sundial", "events", "tail", "--job", job, "--from-beginning"}, kafkaArgs...))
		stop()
		require.NoError(t, err, "stderr: %s", stderr.String())
		seen := out.String()
		require.Contains(t, seen, "SUCCEEDED", "%s did not fire before the test's deadline; its events:\n%s", job, seen)
		// A noop run ends within the runner's StartedDelay: its outcome
		// alone is produced, and carries its start.
		assert.Regexp(t, `(?m)^\S+  SUCCEEDED\s+job `+regexp.QuoteMeta(job)+`  run `+regexp.QuoteMeta(job)+`@\d+  attempt 1  runner \S+  took `, seen)
	}

	storeArgs := []string{"--cassandra-hosts", strings.Join(c.Hosts, ","), "--keyspace", c.Keyspace}
	code, out, errOut = runCLI(t, append([]string{"jobs", "get", "newcomer.cron"}, storeArgs...)...)
	require.Equal(t, 0, code, "stderr: %s", errOut)
	assert.Contains(t, out, "schedule:    time zone UTC (default); DST: nonexistent times shift_forward (default), ambiguous times first (default)")
	code, out, errOut = runCLI(t, append([]string{"jobs", "get", "newcomer.every-second"}, storeArgs...)...)
	require.Equal(t, 0, code, "stderr: %s", errOut)
	assert.Contains(t, out, "schedule:    time zone UTC (default); DST: no effect (interval schedules fire at absolute instants)")
}

// untilWriter keeps what is written and calls found once a write contains
// want.
type untilWriter struct {
	want  string
	found func()

	mu  sync.Mutex
	buf strings.Builder
}

func (w *untilWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if strings.Contains(string(p), w.want) {
		w.found()
	}
	return w.buf.Write(p)
}

func (w *untilWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
