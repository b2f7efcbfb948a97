package deploy_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/deploy/promcheck"
	"github.com/sundialhq/sundial/internal/telemetry"
)

func lookPath(p string) (string, error) { return exec.LookPath(p) }

func ruleFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(ruleGlob)
	require.NoError(t, err)
	for i, f := range files {
		files[i], err = filepath.Abs(f)
		require.NoError(t, err)
	}
	return files
}

// A real Prometheus (Debian's) scrapes a process serving every component's
// metrics through telemetry.Server, loads every rule without error, records
// the shard series, and runs every dashboard query without error. This is
// the harness of TestEndToEndObservability, checked on its own.
func TestPrometheusScrapesAndEvaluates(t *testing.T) {
	t.Parallel()
	bin := needPrometheus(t)
	cat := buildCatalog(t)
	srv, err := telemetry.NewServer(telemetry.Config{Addr: "127.0.0.1:0", Gatherer: cat.reg, Registerer: cat.reg})
	require.NoError(t, err)
	require.NoError(t, srv.Start(t.Context()))
	t.Cleanup(srv.Stop)

	// A second process stands in for a runner: it serves a trigger-latency
	// histogram of the runner's name, built like the components build
	// theirs, so the objective's rules read real scraped buckets (the le
	// label's spelling depends on the exposition format Prometheus picks).
	runnerReg := telemetry.NewRegistry()
	latency := prometheus.NewHistogramVec(telemetry.HistogramOpts("sundial_runner_trigger_latency_seconds", "Trigger latency.", nil), []string{"priority"})
	runnerReg.MustRegister(latency)
	runnerSrv, err := telemetry.NewServer(telemetry.Config{Addr: "127.0.0.1:0", Gatherer: runnerReg})
	require.NoError(t, err)
	require.NoError(t, runnerSrv.Start(t.Context()))
	t.Cleanup(runnerSrv.Stop)
	latency.WithLabelValues("default").Observe(0.2)

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	p, err := promcheck.Start(ctx, promcheck.Config{
		Binary: bin,
		Dir:    t.TempDir(),
		Targets: []promcheck.Target{
			{Addr: srv.Addr().String(), Labels: map[string]string{"component": "dispatcher"}},
			{Addr: runnerSrv.Addr().String(), Labels: map[string]string{"component": "runner"}},
		},
		RuleFiles: ruleFiles(t),
	})
	require.NoError(t, err)
	t.Cleanup(p.Stop)
	require.NoError(t, p.WaitTargetsUp(ctx))

	// Every rule evaluates without error.
	require.Eventually(t, func() bool {
		rules, err := p.Rules(ctx)
		if err != nil || len(rules) == 0 {
			return false
		}
		for _, r := range rules {
			if r.Health == "unknown" {
				return false
			}
		}
		for _, r := range rules {
			assert.Equal(t, "ok", r.Health, "rule %s/%s: %s", r.Group, r.Name, r.LastError)
		}
		return true
	}, time.Minute, 200*time.Millisecond, "rules never all evaluated")

	// The process owns no shard: all 128 are unowned, and the alert is
	// pending (it waits 2 minutes before firing).
	require.Eventually(t, func() bool {
		r, err := p.Query(ctx, "sundial:shards_unowned:count")
		return err == nil && r.HasData() && r.Values[0] == "128"
	}, time.Minute, 200*time.Millisecond)
	require.NoError(t, p.WaitAlert(ctx, "SundialShardUnowned", "pending"))

	r, err := p.Query(ctx, `sundial_dispatcher_shards_owned{job="sundial", component="dispatcher"}`)
	require.NoError(t, err)
	assert.Equal(t, []string{"0"}, r.Values)

	// Three of four starts within 1 s: the objective's rules count them.
	for _, v := range []float64{0.01, 0.5, 3} {
		latency.WithLabelValues("default").Observe(v)
	}
	require.Eventually(t, func() bool {
		r, err := p.Query(ctx, `sundial:runs_started_within_objective:rate5m / sundial:runs_started:rate5m`)
		return err == nil && r.HasData() && r.Values[0] == "0.6666666666666666"
	}, time.Minute, 200*time.Millisecond, "the scraped le=1 bucket is not counted as within the objective")

	// Every dashboard query runs (Prometheus itself finds no type error);
	// which return data depends on traffic, so they are only counted here.
	dash, err := promcheck.DashboardQueries(dashboardGlob)
	require.NoError(t, err)
	withData := 0
	for _, res := range p.CheckQueries(ctx, dash) {
		assert.NoError(t, res.Err, res.Query.String())
		if res.Result.HasData() {
			withData++
		}
	}
	t.Logf("%d of %d dashboard queries return data from an idle process", withData, len(dash))
}

// TestEndToEndObservability checks the dashboards and alerts against a running
// Sundial pipeline. It runs only when SUNDIAL_OBSERVE_TARGETS lists the
// processes to scrape, as component=host:port pairs separated by commas:
//
//	SUNDIAL_OBSERVE_TARGETS=registry=127.0.0.1:9461,dispatcher=127.0.0.1:9464,runner=127.0.0.1:9465 \
//	  go test -run TestEndToEndObservability -v -timeout 90m ./deploy/
//
// It starts Debian's prometheus on 127.0.0.1 with the rules of
// deploy/prometheus/rules (scrape and evaluation every second), waits until
// every target is up, then polls every dashboard query until all return data
// or SUNDIAL_OBSERVE_SETTLE (default 3m) passes, and fails naming the queries
// that never did, except panels whose title matches the regular expression
// SUNDIAL_OBSERVE_ALLOW_EMPTY (for example "Circuit breakers" when no
// downstream was called). With SUNDIAL_OBSERVE_STOP_RUNNERS and
// SUNDIAL_OBSERVE_START_RUNNERS (shell commands), it then stops the runners,
// waits for each alert of SUNDIAL_OBSERVE_ALERTS (default
// SundialRunsNotStarting,SundialTriggerLatencyBudgetBurn) to fire, starts them
// again and waits for each alert of SUNDIAL_OBSERVE_RESOLVE (default
// SundialRunsNotStarting) to resolve. The budget-burn alert resolves only
// once its 30-minute short window has passed the outage; list it in
// SUNDIAL_OBSERVE_RESOLVE to wait for that too. Each wait is bounded by
// SUNDIAL_OBSERVE_ALERT_TIMEOUT (default 15m, 40m when the budget-burn alert
// must resolve). Prometheus's directory is kept when SUNDIAL_OBSERVE_DIR is set.
func TestEndToEndObservability(t *testing.T) {
	spec := os.Getenv("SUNDIAL_OBSERVE_TARGETS")
	if spec == "" {
		t.Skip("SUNDIAL_OBSERVE_TARGETS is not set: no Sundial processes to observe")
	}
	bin := needPrometheus(t)
	targets, err := parseTargets(spec)
	require.NoError(t, err)
	settle := envDuration(t, "SUNDIAL_OBSERVE_SETTLE", 3*time.Minute)
	resolve := envList("SUNDIAL_OBSERVE_RESOLVE", "SundialRunsNotStarting")
	alertTimeout := 15 * time.Minute
	for _, a := range resolve {
		if a == "SundialTriggerLatencyBudgetBurn" {
			alertTimeout = 40 * time.Minute
		}
	}
	alertTimeout = envDuration(t, "SUNDIAL_OBSERVE_ALERT_TIMEOUT", alertTimeout)
	dir := os.Getenv("SUNDIAL_OBSERVE_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	ctx := t.Context()

	p, err := promcheck.Start(ctx, promcheck.Config{Binary: bin, Dir: dir, Targets: targets, RuleFiles: ruleFiles(t)})
	require.NoError(t, err)
	t.Cleanup(p.Stop)
	t.Logf("prometheus at %s, log %s", p.URL, p.LogPath)
	upCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, p.WaitTargetsUp(upCtx))

	dash, err := promcheck.DashboardQueries(dashboardGlob)
	require.NoError(t, err)
	deadline := time.Now().Add(settle)
	var missing []promcheck.QueryResult
	for {
		missing = missing[:0]
		for _, res := range p.CheckQueries(ctx, dash) {
			if res.Err != nil || !res.Result.HasData() {
				missing = append(missing, res)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(5 * time.Second):
		}
	}
	t.Logf("%d of %d dashboard queries return data", len(dash)-len(missing), len(dash))
	var allowEmpty *regexp.Regexp
	if v := os.Getenv("SUNDIAL_OBSERVE_ALLOW_EMPTY"); v != "" {
		allowEmpty, err = regexp.Compile(v)
		require.NoError(t, err, "SUNDIAL_OBSERVE_ALLOW_EMPTY")
	}
	for _, m := range missing {
		if m.Err == nil && allowEmpty != nil && allowEmpty.MatchString(m.Query.Where) {
			t.Logf("no data (allowed): %s", m.Query)
			continue
		}
		t.Errorf("no data: %s (err: %v)", m.Query, m.Err)
	}

	stop, start := os.Getenv("SUNDIAL_OBSERVE_STOP_RUNNERS"), os.Getenv("SUNDIAL_OBSERVE_START_RUNNERS")
	if stop == "" || start == "" {
		t.Log("SUNDIAL_OBSERVE_STOP_RUNNERS/START_RUNNERS not set: alerts not exercised")
		return
	}
	alerts := envList("SUNDIAL_OBSERVE_ALERTS", "SundialRunsNotStarting,SundialTriggerLatencyBudgetBurn")
	for _, a := range alerts {
		actx, cancel := context.WithTimeout(ctx, alertTimeout)
		err := p.WaitAlert(actx, a, "inactive")
		cancel()
		require.NoError(t, err, "%s fires before the runners stop", a)
	}
	runShell(t, stop)
	stopped := time.Now()
	for _, a := range alerts {
		actx, cancel := context.WithTimeout(ctx, alertTimeout)
		err := p.WaitAlert(actx, a, "firing")
		cancel()
		require.NoError(t, err)
		t.Logf("%s firing %s after the runners stopped", a, time.Since(stopped).Round(time.Second))
	}
	runShell(t, start)
	started := time.Now()
	for _, a := range resolve {
		actx, cancel := context.WithTimeout(ctx, alertTimeout)
		err := p.WaitAlert(actx, a, "inactive")
		cancel()
		require.NoError(t, err)
		t.Logf("%s resolved %s after the runners started", a, time.Since(started).Round(time.Second))
	}
}

func parseTargets(spec string) ([]promcheck.Target, error) {
	var out []promcheck.Target
	for _, part := range strings.Split(spec, ",") {
		component, addr, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || component == "" || addr == "" {
			return nil, fmt.Errorf("SUNDIAL_OBSERVE_TARGETS: %q is not component=host:port", part)
		}
		out = append(out, promcheck.Target{Addr: addr, Labels: map[string]string{"component": component}})
	}
	return out, nil
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	require.NoError(t, err, name)
	return d
}

func envList(name, def string) []string {
	v := os.Getenv(name)
	if v == "" {
		v = def
	}
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func runShell(t *testing.T, command string) {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "bash", "-c", command).CombinedOutput()
	require.NoError(t, err, "%s: %s", command, out)
	t.Logf("ran %q", command)
}
