package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/assemble"
	"github.com/sundialhq/sundial/bench"
	"github.com/sundialhq/sundial/enqueue"
	"github.com/sundialhq/sundial/history"
	"github.com/sundialhq/sundial/internal/testenv"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner"
	"github.com/sundialhq/sundial/runner/target"
	"github.com/sundialhq/sundial/store"
)

// TestRunsListLateByNamesNoExecutor is issue 31's "done when": on the real
// stack, the only executor stops for 20 s while the runs of an every-second
// job fall due; once it is back, `sundial runs list --late-by 5s` lists
// those runs with the reason "no executor".
func TestRunsListLateByNamesNoExecutor(t *testing.T) {
	t.Parallel()
	k := testenv.NeedKafka(t)
	c := testenv.NeedCassandra(t)
	rd := testenv.NeedRedis(t)
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	log := slog.New(slog.DiscardHandler)

	// The registry and a dispatcher; the runner and the history writer are
	// the test's own, so that it can stop the runner.
	pl, ns := startPipeline(ctx, t, k, c, rd, "whylate", bench.PipelineConfig{Dispatchers: 1, Logger: log})
	st := pl.Store()
	names := ns.Names()
	kafka := []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}

	w, err := history.New(history.Config{Kafka: kafka, Topics: names, Group: ns.TopicPrefix + "history", History: st, Logger: log})
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(w.Stop)

	cluster, err := st.GetClusterConfig(ctx)
	require.NoError(t, err)
	enqClient, err := kgo.NewClient(append(kafka, kgo.RecordPartitioner(enqueue.Partitioner(names, nil)))...)
	require.NoError(t, err)
	t.Cleanup(enqClient.Close)
	enq, err := enqueue.New(enqueue.Config{Store: st, Client: enqClient, Topics: names, Shards: cluster.Shards, Logger: log})
	require.NoError(t, err)
	rc := redis.NewClient(&redis.Options{Addr: rd.Addr})
	t.Cleanup(func() { _ = rc.Close() })
	startRunner := func(id string) *runner.Runner {
		r, err := assemble.Runner(ctx, runner.Config{ID: id, Kafka: kafka, Topics: names, Group: ns.TopicPrefix + "runners",
			Handlers:   map[string]target.Handler{"noop": target.HandlerFunc(func(context.Context, *sundialv1.Run) error { return nil })},
			Registerer: prometheus.NewRegistry(), Logger: log},
			assemble.RunnerBackends{Redis: rc, RedisKeyPrefix: ns.RedisPrefix, Enqueuer: enq, Checkpoints: st, Quotas: st})
		require.NoError(t, err)
		require.NoError(t, r.Start(ctx))
		t.Cleanup(r.Stop)
		return r
	}
	first := startRunner("whylate-runner-1")

	const team, job = "whylate", "whylate.tick"
	file := filepath.Join(t.TempDir(), "jobs.json")
	require.NoError(t, os.WriteFile(file, []byte(`[{"id": "`+job+`", "ownerTeam": "`+team+`",
		"schedule": {"interval": {"every": "1s"}}, "overlapPolicy": "OVERLAP_POLICY_ALLOW",
		"target": {"handler": {"name": "noop"}}}]`), 0o600))
	kafkaArgs := []string{"--kafka-brokers", strings.Join(k.Brokers, ","), "--topic-prefix", k.TopicPrefix}
	storeArgs := []string{"--cassandra-hosts", strings.Join(c.Hosts, ","), "--keyspace", c.Keyspace}
	code, out, errOut := runCLI(t, append(append([]string{"teams", "create", team}, storeArgs...), kafkaArgs...)...)
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out, errOut)
	code, out, errOut = runCLI(t, append([]string{"jobs", "apply", "-f", file, "--timeout", "2m"}, kafkaArgs...)...)
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out, errOut)

	// Wait for conditions, never for time: the bounds are generous for a
	// busy machine, and only ever end a failing test.
	teamRuns := func(from time.Time, keep func(store.RunRecord) bool) []store.RunRecord {
		recs, err := st.ListTeamRuns(ctx, store.TeamRunsQuery{Team: team, From: from, To: time.Now().Add(time.Hour), Keep: keep, Limit: 1000})
		require.NoError(t, err)
		return recs
	}
	succeeded := func(r store.RunRecord) bool { return r.State == store.StateSucceeded }
	require.Eventually(t, func() bool { return len(teamRuns(time.Now().Add(-time.Hour), succeeded)) > 0 },
		3*time.Minute, 200*time.Millisecond, "the job's runs succeed while the runner is up")

	// The only executor stops; the dispatcher goes on writing the runs as
	// they fall due, until runs due 20 s after the stop are dispatched
	// (their ENQUEUED events in the history).
	first.Stop()
	stopped := time.Now()
	require.Eventually(t, func() bool { return len(teamRuns(stopped.Add(20*time.Second), nil)) > 0 },
		3*time.Minute, 200*time.Millisecond, "runs fall due while no executor is live")
	startRunner("whylate-runner-2")

	// The runs that waited are executed, and runs list --late-by 5s names
	// them with the reason "no executor".
	lateRow := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(job) + `\s+` + regexp.QuoteMeta(job) + `@\d+\s+1\s+succeeded\s+\S+\s+\S+\s+(\S+)\s+no executor\s`)
	var listed string
	require.Eventually(t, func() bool {
		code, out, errOut := runCLI(t, append([]string{"runs", "list", "--team", team, "--late-by", "5s", "--since", "10m", "--limit", "1000"}, storeArgs...)...)
		require.Equal(t, 0, code, "stderr: %s", errOut)
		listed = out
		// Every run due from 5 s to 15 s after the stop waited for the
		// executor: at least ten of them are listed.
		return len(lateRow.FindAllString(out, -1)) >= 10
	}, 3*time.Minute, 500*time.Millisecond, "runs list --late-by 5s lists the runs that waited for an executor, with the reason")
	t.Logf("sundial runs list --late-by 5s:\n%s", listed)
	for _, m := range lateRow.FindAllStringSubmatch(listed, -1) {
		late, err := time.ParseDuration(m[1])
		require.NoError(t, err, m[0])
		assert.GreaterOrEqual(t, late, 5*time.Second, m[0])
	}
	for _, line := range strings.Split(listed, "\n") {
		if strings.HasPrefix(line, job+" ") {
			assert.Regexp(t, `\sno executor\s`, line, "every run listed as late waited for an executor")
		}
	}

	// runs get explains one of them: its timeline and its reason.
	ids := regexp.MustCompile(regexp.QuoteMeta(job)+`@\d+`).FindAllString(lateRow.FindString(listed), -1)
	require.NotEmpty(t, ids)
	code, out, errOut = runCLI(t, append([]string{"runs", "get", ids[len(ids)-1]}, storeArgs...)...)
	require.Equal(t, 0, code, "stderr: %s", errOut)
	for _, want := range []string{"timeline:", "dispatched", "received", "leased", "started", "reason: no executor"} {
		assert.Contains(t, out, want, fmt.Sprintf("runs get:\n%s", out))
	}
}
