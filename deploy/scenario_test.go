//go:build observability

package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/deploy/promcheck"
	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// scenarioEmpty are the dashboard queries the scenario leaves without data,
// each with the reason: the panel's title, a part of the query that tells
// it from the panel's other queries, and why nothing happens that it would
// show. observe logs any of them that returns data after all.
var scenarioEmpty = []struct{ panel, expr, reason string }{
	{"Connection, read and write errors", "sundial_kafka_", "no Kafka connection, read or write fails; kprom creates these series at the first error"},
	{"Broker throttling p99", "", "the local broker has no quotas, so it never throttles"},
	{"Connection pool", `outcome!="ok"`, "no Redis dial fails; the series of failed dials appear at the first failure"},
	{"Driver retries", "", "gocql retries no statement on a healthy node; the series appear at the first retry"},
	{"Duplicates, drops and dead letters", `outcome="duplicate"`, "no completed run is delivered again (that takes a runner losing its partition between finishing a run and committing its offset), and the runner creates the outcome=\"duplicate\" series only at the first one"},
	{"Conflicts and retries", "sundial_dagengine_retries_total", "no DAG engine operation fails transiently; the series of an operation appear at its first retry"},
	{"Workers connected by team", "", "the scenario runs no API, so no worker gateway"},
	{"Gateway tasks by team", "", "the scenario runs no API, so no worker gateway"},
	{"Gateway task queue and poll wait", "", "the scenario runs no API, so no worker gateway"},
	{"Gateway completes and lost workers", "", "the scenario runs no API, so no worker gateway"},
}

func scenarioExpectedEmpty(q promcheck.Query) (string, bool) {
	for _, e := range scenarioEmpty {
		if q.Where == e.panel && strings.Contains(q.Expr, e.expr) {
			return e.reason, true
		}
	}
	return "", false
}

// TestObservabilityScenario is the end-to-end check of the dashboards and
// alerts, run by itself behind the observability build tag: `make
// test-observability` runs it (it takes about ten minutes, so `make test`
// does not build it). On the local stack, with a topic prefix, keyspace and Redis key
// prefix of its own, it migrates, starts a registry, a dispatcher, a runner
// and a DAG engine from the sundial binary (SUNDIAL_OBSERVE_BINARY, or built
// here), and puts load on them: SUNDIAL_OBSERVE_JOBS noop jobs every 15 s
// (default 300), HTTP jobs calling a downstream served by the test (one of
// them failing, for retries and dead letters), a trigger, deleted jobs (for
// dropped entries), an invalid definition (for a rejection) and a DAG of two
// nodes every 20 s. Then observe: after SUNDIAL_OBSERVE_WARMUP (default 2m)
// of load, every dashboard query returns data except those of
// scenarioEmpty, and SundialRunsNotStarting and
// SundialTriggerLatencyBudgetBurn fire when the runner is stopped (SIGSTOP)
// and the alerts of SUNDIAL_OBSERVE_RESOLVE (default SundialRunsNotStarting;
// the budget-burn alert takes more than 30 minutes) resolve when it
// continues (SIGCONT). Every process is ended, and the keyspace, topics and
// Redis keys are deleted, however the test ends; the processes also die with
// the test binary. The processes' and Prometheus's logs are kept in
// SUNDIAL_OBSERVE_DIR when set, and the processes' last lines are printed
// when the test fails.
func TestObservabilityScenario(t *testing.T) {
	needPrometheus(t)
	k := testenv.NeedKafka(t)
	c := testenv.NeedCassandra(t)
	r := testenv.NeedRedis(t)
	bin := sundialBinary(t)
	dir := os.Getenv("SUNDIAL_OBSERVE_DIR")
	if dir == "" {
		dir = t.TempDir()
	} else {
		require.NoError(t, os.MkdirAll(dir, 0o755))
	}
	env := append(os.Environ(),
		"SUNDIAL_KAFKA_BROKERS="+strings.Join(k.Brokers, ","),
		"SUNDIAL_CASSANDRA_HOSTS="+strings.Join(c.Hosts, ","),
		"SUNDIAL_REDIS_ADDR="+r.Addr,
		"SUNDIAL_TOPIC_PREFIX="+k.TopicPrefix,
		"SUNDIAL_KEYSPACE="+c.Keyspace,
		"SUNDIAL_REDIS_KEY_PREFIX="+r.KeyPrefix,
		"SUNDIAL_LOG_FORMAT=json",
	)
	sundial := func(args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "sundial %s:\n%s", strings.Join(args, " "), out)
		t.Logf("sundial %s: %d lines of output, last: %s", args[0], strings.Count(string(out), "\n"), lastLine(out))
	}

	// The downstream of the HTTP jobs: /ok answers 204, /fail 500.
	downstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			http.Error(w, "failing on purpose", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(downstream.Close)

	t.Logf("topic prefix %s, keyspace %s, Redis key prefix %s, logs in %s", k.TopicPrefix, c.Keyspace, r.KeyPrefix, dir)
	sundial("migrate", "--timeout", "5m")

	// One of each component; the telemetry servers listen on free ports.
	registry := startSundial(t, bin, env, dir, "registry", "registry", "--metrics-addr", "127.0.0.1:0")
	dispatcher := startSundial(t, bin, env, dir, "dispatcher", "dispatcher", "--metrics-addr", "127.0.0.1:0")
	// The jobs' downstream listens on loopback, which runners refuse by
	// default: the jobs' team may reach it.
	runner := startSundial(t, bin, env, dir, "runner", "runner", "--metrics-addr", "127.0.0.1:0", "--shutdown-timeout", "5s",
		"--egress-allow", "team=observability:127.0.0.0/8")
	dagengine := startSundial(t, bin, env, dir, "dagengine", "dag", "engine", "--metrics-addr", "127.0.0.1:0", "--sweep-interval", "10s")
	procs := []*sundialProcess{registry, dispatcher, runner, dagengine}
	var targets []promcheck.Target
	for _, p := range procs {
		p.waitReady(t, 3*time.Minute)
		targets = append(targets, promcheck.Target{Addr: p.addr, Labels: map[string]string{"component": p.name}})
	}

	// Load.
	jobsPrefix := "obs-" + strings.TrimSuffix(k.TopicPrefix, ".")
	jobs := scenarioJobs(t, jobsPrefix, envInt(t, "SUNDIAL_OBSERVE_JOBS", 300), downstream.URL)
	jobsFile := filepath.Join(dir, "jobs.json")
	require.NoError(t, os.WriteFile(jobsFile, jobs, 0o644))
	sundial("jobs", "apply", "-f", jobsFile, "--timeout", "2m")
	// Deleted jobs: the dispatcher drops their entries (reason dead).
	sundial("jobs", "delete", "--timeout", "2m", jobsPrefix+"-noop-0", jobsPrefix+"-noop-1", jobsPrefix+"-noop-2")
	sundial("trigger", "--key", jobsPrefix+"-trigger", "--timeout", "2m", jobsPrefix+"-noop-3")
	// A DAG of two noop nodes, a then b, every 20 s.
	dagFile := filepath.Join(dir, "dag.json")
	require.NoError(t, os.WriteFile(dagFile, scenarioDAG(t, jobsPrefix+"-dag"), 0o644))
	sundial("dag", "apply", "--timeout", "2m", dagFile)
	// An invalid definition, produced directly: the CLI would refuse it
	// before it reached the registry.
	produceInvalidDefinition(t, k.Brokers, topics.Names{Prefix: k.TopicPrefix}, jobsPrefix+"-invalid")

	observe(t, observation{
		targets:       targets,
		dir:           filepath.Join(dir, "prometheus"),
		settle:        envDuration(t, "SUNDIAL_OBSERVE_SETTLE", 4*time.Minute),
		warmup:        envDuration(t, "SUNDIAL_OBSERVE_WARMUP", 2*time.Minute),
		expectedEmpty: scenarioExpectedEmpty,
		stopRunners:   func() error { return runner.signal(t, syscall.SIGSTOP) },
		startRunners:  func() error { return runner.signal(t, syscall.SIGCONT) },
		alerts:        []string{"SundialRunsNotStarting", "SundialTriggerLatencyBudgetBurn"},
		resolve:       envList("SUNDIAL_OBSERVE_RESOLVE", "SundialRunsNotStarting"),
	})
	for _, p := range procs {
		require.NoError(t, p.exitErr(), "%s exited before the end", p.name)
	}
}

// scenarioJobs returns the JSON array of the scenario's job definitions.
func scenarioJobs(t *testing.T, prefix string, noop int, downstream string) []byte {
	t.Helper()
	var jobs []map[string]any
	for i := range noop {
		jobs = append(jobs, map[string]any{
			"id": fmt.Sprintf("%s-noop-%d", prefix, i), "ownerTeam": "observability",
			"description": "load of the observability scenario",
			"schedule": map[string]any{
				"interval": map[string]any{"every": "15s", "offset": fmt.Sprintf("%ds", i%15)},
				"timeZone": "UTC",
			},
			"target": map[string]any{"handler": map[string]any{"name": "noop"}},
		})
	}
	// HTTP calls that succeed, about one a second: the downstream's
	// circuit breaker has a state, and it stays closed because the
	// successes reset its count of consecutive failures.
	for i := range 5 {
		jobs = append(jobs, map[string]any{
			"id": fmt.Sprintf("%s-http-%d", prefix, i), "ownerTeam": "observability",
			"description": "calls the scenario's downstream",
			"schedule": map[string]any{
				"interval": map[string]any{"every": "5s", "offset": fmt.Sprintf("%ds", i)},
				"timeZone": "UTC",
			},
			"target":  map[string]any{"http": map[string]any{"method": "POST", "url": downstream + "/ok"}},
			"timeout": "5s",
		})
	}
	// One that fails twice a minute: a retry, then a dead letter. Few, so
	// the late starts of retries do not spend the objective's budget.
	jobs = append(jobs, map[string]any{
		"id": prefix + "-fail", "ownerTeam": "observability",
		"description": "the scenario's downstream answers 500",
		"schedule": map[string]any{
			"interval": map[string]any{"every": "30s"},
			"timeZone": "UTC",
		},
		"target":  map[string]any{"http": map[string]any{"method": "POST", "url": downstream + "/fail"}},
		"retry":   map[string]any{"maxAttempts": 2, "initialBackoff": "1s", "maxBackoff": "1s"},
		"timeout": "5s",
	})
	b, err := json.Marshal(jobs)
	require.NoError(t, err)
	return b
}

// scenarioDAG returns the JSON DagSpec of the scenario's DAG.
func scenarioDAG(t *testing.T, id string) []byte {
	t.Helper()
	noop := map[string]any{"target": map[string]any{"handler": map[string]any{"name": "noop"}}}
	b, err := json.Marshal(map[string]any{
		"id": id, "ownerTeam": "observability", "description": "the observability scenario's DAG",
		"schedule": map[string]any{"interval": map[string]any{"every": "20s"}, "timeZone": "UTC"},
		"nodes": []map[string]any{
			{"id": "a", "inline": noop},
			{"id": "b", "parents": []string{"a"}, "inline": noop},
		},
	})
	require.NoError(t, err)
	return b
}

// produceInvalidDefinition writes a definition the registry rejects (an
// interval of 0s) to sundial.jobs.
func produceInvalidDefinition(t *testing.T, brokers []string, names topics.Names, id string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	value := fmt.Sprintf(`{"id":%q,"ownerTeam":"observability","schedule":{"interval":{"every":"0s"},"timeZone":"UTC"},"target":{"handler":{"name":"noop"}}}`, id)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{
		Topic: names.Jobs(), Key: []byte(id), Value: []byte(value),
		Headers: []kgo.RecordHeader{{Key: sundialv1.HeaderContentType, Value: []byte(sundialv1.ContentTypeJSON)}},
	}).FirstErr())
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var n int
	_, err := fmt.Sscan(v, &n)
	require.NoError(t, err, name)
	return n
}
