package deploy_test

import (
	"context"
	"os/exec"
	"path/filepath"
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
