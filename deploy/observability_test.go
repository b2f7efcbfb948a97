// Package deploy_test checks the observability configuration under deploy/:
// every PromQL expression of the Grafana dashboards and the Prometheus rules
// parses with Prometheus's parser and reads only metrics that Sundial's
// processes register (or that the recording rules define), and a real
// Prometheus loads the rules and scrapes a Sundial process.
package deploy_test

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sundialhq/sundial/deploy/promcheck"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// Idle HTTP keep-alive connections of the Prometheus API client and
		// go-redis's pool reaper exit asynchronously.
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	)
}

const (
	dashboardGlob = "grafana/dashboards/*.json"
	ruleGlob      = "prometheus/rules/*.yml"
)

func allQueries(t *testing.T) ([]promcheck.Query, promcheck.Rules) {
	t.Helper()
	dash, err := promcheck.DashboardQueries(dashboardGlob)
	require.NoError(t, err)
	rules, err := promcheck.RuleQueries(ruleGlob)
	require.NoError(t, err)
	require.NotEmpty(t, dash)
	require.NotEmpty(t, rules.Queries)
	return append(dash, rules.Queries...), rules
}

// Every expression parses, and every metric it reads is registered by a
// Sundial component or the telemetry package, written by a recording rule,
// or made by Prometheus itself.
func TestQueriesReadRealMetrics(t *testing.T) {
	t.Parallel()
	queries, rules := allQueries(t)
	known := buildCatalog(t).seriesNames()

	var problems []string
	used := map[string]bool{}
	for _, q := range queries {
		names, err := promcheck.Metrics(q.Expr)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s\n    does not parse: %v", q, err))
			continue
		}
		for _, n := range names {
			used[n] = true
			if _, ok := known[n]; ok || slices.Contains(rules.Recorded, n) || promcheck.IsBuiltin(n) {
				continue
			}
			problems = append(problems, fmt.Sprintf("%s\n    reads %s, which no component registers", q, n))
		}
	}
	assert.Empty(t, problems, "%d problems:\n%s", len(problems), strings.Join(problems, "\n"))
	t.Logf("%d queries (%d from rules) read %d distinct series names", len(queries), len(rules.Queries), len(used))

	for _, r := range rules.Recorded {
		assert.True(t, used[r] || strings.HasPrefix(r, "sundial:runs_started:") || strings.HasPrefix(r, "sundial:runs_started_within") ||
			strings.HasPrefix(r, "sundial:runs_dispatched:") || strings.HasPrefix(r, "sundial:runs_due:") ||
			strings.HasPrefix(r, "sundial:trigger_slo_errors:"), "recorded series %s is never read", r)
	}
}

// notCharted are Sundial metrics deliberately left off the dashboards, with
// the reason.
var notCharted = map[string]string{
	"sundial_registry_processing_seconds":          "per-record cost; the registry lag and outcomes are charted",
	"sundial_registry_lag_seconds":                 "registration lag; a candidate for the overview once the registry runs at scale",
	"sundial_registry_retries_total":               "transient retries; errors show in outcomes",
	"sundial_registry_ownership_enforced":          "a setting of the installation, not a signal: the start-up log and JobStatus.ownership_enforced say it too",
	"sundial_trigger_retries_total":                "transient retries; errors show in outcomes",
	"sundial_trigger_processing_seconds":           "per-trigger cost; triggers' latency shows in dispatch latency (origin trigger)",
	"sundial_redis_pool_hits_total":                "pool efficiency detail; connections and timeouts are charted",
	"sundial_redis_pool_misses_total":              "pool efficiency detail",
	"sundial_redis_pool_waits_total":               "pool efficiency detail",
	"sundial_redis_pool_wait_seconds_total":        "pool efficiency detail",
	"sundial_kafka_connects_total":                 "connections are charted through their errors",
	"sundial_kafka_disconnects_total":              "see connects",
	"sundial_kafka_read_bytes_total":               "wire bytes; uncompressed record bytes are charted",
	"sundial_kafka_write_bytes_total":              "wire bytes; uncompressed record bytes are charted",
	"sundial_kafka_produce_batches_total":          "batching detail",
	"sundial_kafka_fetch_batches_total":            "batching detail",
	"sundial_kafka_buffered_produce_bytes":         "records buffered are charted",
	"sundial_kafka_buffered_fetch_records_total":   "consumer-side buffering detail",
	"sundial_kafka_buffered_fetch_bytes":           "consumer-side buffering detail",
	"sundial_kafka_read_wait_seconds":              "histogram not enabled",
	"sundial_kafka_read_time_seconds":              "histogram not enabled",
	"sundial_kafka_write_wait_seconds":             "histogram not enabled",
	"sundial_kafka_write_time_seconds":             "histogram not enabled",
	"sundial_kafka_produce_compressed_bytes_total": "compression detail",
	"sundial_kafka_fetch_compressed_bytes_total":   "compression detail",
}

// Every Sundial metric a component registers is on a dashboard or in a rule,
// unless notCharted says why not: a new metric nobody looks at is noticed.
// Metric names follow sundial_<component>_<what>_<unit>, and no metric is
// labelled by job or run (unbounded series).
func TestEveryMetricIsChartedAndBounded(t *testing.T) {
	t.Parallel()
	queries, _ := allQueries(t)
	used := map[string]bool{}
	for _, q := range queries {
		names, err := promcheck.Metrics(q.Expr)
		require.NoError(t, err, q.String())
		for _, n := range names {
			used[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_count"), "_sum")] = true
			used[n] = true
		}
	}
	var uncharted []string
	for _, m := range buildCatalog(t).families() {
		if !strings.HasPrefix(m.name, "sundial_") {
			continue
		}
		assert.Regexp(t, `^sundial_[a-z]+_[a-z0-9_]+$`, m.name)
		for _, l := range m.labels {
			assert.NotContains(t, []string{"job_id", "run_id", "job", "run", "dag_id", "key"}, l,
				"%s is labelled by %s: one series per job or run", m.name, l)
		}
		if !used[m.name] {
			if _, ok := notCharted[m.name]; !ok {
				uncharted = append(uncharted, m.name)
			}
		}
	}
	sort.Strings(uncharted)
	assert.Empty(t, uncharted, "metrics on no dashboard and in no rule (chart them or add them to notCharted with a reason)")
}

// The metrics the issue requires are charted; a renamed metric breaks this
// test rather than silently emptying a panel.
func TestRequiredIndicatorsAreCharted(t *testing.T) {
	t.Parallel()
	dash, err := promcheck.DashboardQueries(dashboardGlob)
	require.NoError(t, err)
	all := ""
	for _, q := range dash {
		all += q.Expr + "\n"
	}
	for _, want := range []string{
		"sundial_runner_trigger_latency_seconds_bucket",
		"sundial_dispatcher_dispatch_latency_seconds_bucket",
		"sundial_dispatcher_shard_lag_seconds",
		"sundial_dispatcher_watermark_age_seconds",
		"sundial_dispatcher_shards_owned",
		"sundial:shards_unowned:count",
		"sundial_dispatcher_bucket_load_seconds_bucket",
		"sundial_dispatcher_bucket_entries_bucket",
		"sundial_runner_runs_total",
		"sundial_runner_retries_total",
		"sundial_runner_dead_letters_total",
		`sundial_runner_lease_acquisitions_total{result=~"held|no_slot"}`,
		"sundial_runner_leases_lost_total",
		"sundial_runner_runs_in_flight",
		"sundial_runner_breaker_state",
		"sundial_registry_records_total",
		"sundial_registry_rejections_total",
		"sundial_kafka_request_duration_e2e_seconds_bucket",
		"sundial_redis_command_duration_seconds_bucket",
		"sundial_cassandra_request_duration_seconds_bucket",
		"sundial:trigger_slo_errors:ratio_rate5m",
		`outcome="duplicate"`,
		"sundial_dagengine_dag_runs_total",
		"sundial_dagengine_dag_runs",
	} {
		assert.Contains(t, all, want)
	}
}

// needPrometheus returns the prometheus binary, skipping (or failing in CI)
// when it is missing.
func needPrometheus(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("SUNDIAL_PROMETHEUS"), "prometheus"} {
		if p == "" {
			continue
		}
		if path, err := lookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("prometheus is not installed (Debian: apt-get install prometheus); CI must have it")
	}
	t.Skip("prometheus is not installed (Debian: apt-get install prometheus)")
	return ""
}
