//go:build observability

package deploy_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/deploy/promcheck"
)

// TestEndToEndObservability checks the dashboards and alerts against a running
// Sundial pipeline. It runs only when SUNDIAL_OBSERVE_TARGETS lists the
// processes to scrape, as component=host:port pairs separated by commas:
//
//	SUNDIAL_OBSERVE_TARGETS=registry=127.0.0.1:9461,dispatcher=127.0.0.1:9464,runner=127.0.0.1:9465 \
//	  go test -tags observability -run TestEndToEndObservability -v -timeout 90m ./deploy/
//
// It starts Debian's prometheus on 127.0.0.1 with the rules of
// deploy/prometheus/rules (scrape and evaluation every second), waits until
// every target is up, then polls every dashboard query until all return data
// (except panels whose title matches the regular expression
// SUNDIAL_OBSERVE_ALLOW_EMPTY, for example "Circuit breakers" when no
// downstream was called) or SUNDIAL_OBSERVE_SETTLE (default 3m) passes, and
// fails naming the queries that never did and were not allowed to. With SUNDIAL_OBSERVE_STOP_RUNNERS and
// SUNDIAL_OBSERVE_START_RUNNERS (shell commands), it then stops the runners,
// waits for each alert of SUNDIAL_OBSERVE_ALERTS (default
// SundialRunsNotStarting,SundialTriggerLatencyBudgetBurn) to fire, starts them
// again and waits for each alert of SUNDIAL_OBSERVE_RESOLVE (default
// SundialRunsNotStarting) to resolve. The budget-burn alert resolves only
// once its 30-minute short window has passed the outage; list it in
// SUNDIAL_OBSERVE_RESOLVE to wait for that too. Each wait is bounded by
// SUNDIAL_OBSERVE_ALERT_TIMEOUT (default 15m, 40m when the budget-burn alert
// must resolve). Prometheus's directory is kept when SUNDIAL_OBSERVE_DIR is set.
// TestObservabilityScenario (scenario_test.go) does the same with a pipeline
// and load of its own.
func TestEndToEndObservability(t *testing.T) {
	spec := os.Getenv("SUNDIAL_OBSERVE_TARGETS")
	if spec == "" {
		t.Fatal("SUNDIAL_OBSERVE_TARGETS is not set: no Sundial processes to observe (make test-observability runs only TestObservabilityScenario)")
	}
	targets, err := parseTargets(spec)
	require.NoError(t, err)
	o := observation{
		targets: targets,
		dir:     os.Getenv("SUNDIAL_OBSERVE_DIR"),
		settle:  envDuration(t, "SUNDIAL_OBSERVE_SETTLE", 3*time.Minute),
		warmup:  envDuration(t, "SUNDIAL_OBSERVE_WARMUP", 0),
		alerts:  envList("SUNDIAL_OBSERVE_ALERTS", "SundialRunsNotStarting,SundialTriggerLatencyBudgetBurn"),
		resolve: envList("SUNDIAL_OBSERVE_RESOLVE", "SundialRunsNotStarting"),
	}
	if v := os.Getenv("SUNDIAL_OBSERVE_ALLOW_EMPTY"); v != "" {
		re, err := regexp.Compile(v)
		require.NoError(t, err, "SUNDIAL_OBSERVE_ALLOW_EMPTY")
		o.expectedEmpty = func(q promcheck.Query) (string, bool) {
			return "panel title matches SUNDIAL_OBSERVE_ALLOW_EMPTY", re.MatchString(q.Where)
		}
	}
	o.alertTimeout = o.defaultAlertTimeout()
	o.alertTimeout = envDuration(t, "SUNDIAL_OBSERVE_ALERT_TIMEOUT", o.alertTimeout)
	if stop, start := os.Getenv("SUNDIAL_OBSERVE_STOP_RUNNERS"), os.Getenv("SUNDIAL_OBSERVE_START_RUNNERS"); stop != "" && start != "" {
		o.stopRunners = func() error { return runShell(t, stop) }
		o.startRunners = func() error { return runShell(t, start) }
	}
	observe(t, o)
}

// observation is what observe checks against a running pipeline.
type observation struct {
	// targets are the Sundial processes to scrape.
	targets []promcheck.Target
	// dir keeps Prometheus's configuration, data and log; empty: a
	// temporary directory.
	dir string
	// settle bounds the wait for the dashboard queries to return data.
	settle time.Duration
	// warmup is the least time the queries are polled before they are
	// judged and the runners stopped, so that both happen on a pipeline
	// that has run under its load for a while.
	warmup time.Duration
	// expectedEmpty says whether a dashboard query may stay without data,
	// and why; nil: none may.
	expectedEmpty func(promcheck.Query) (reason string, ok bool)
	// stopRunners and startRunners stop and start every runner; nil: the
	// alerts are not exercised.
	stopRunners, startRunners func() error
	// alerts must fire once the runners stop; resolve must resolve once
	// they start again.
	alerts, resolve []string
	// alertTimeout bounds each wait for an alert's state.
	alertTimeout time.Duration
}

// defaultAlertTimeout is 15 minutes, or 40 when the budget-burn alert must
// resolve (its 30-minute short window must pass the outage first).
func (o observation) defaultAlertTimeout() time.Duration {
	for _, a := range o.resolve {
		if a == "SundialTriggerLatencyBudgetBurn" {
			return 40 * time.Minute
		}
	}
	return 15 * time.Minute
}

// observe starts Debian's prometheus on 127.0.0.1 with the rules of
// deploy/prometheus/rules (scrape and evaluation every second), waits until
// every target is up, then polls every dashboard query until all return
// data, or all that do not are expected to stay empty (but for at least
// o.warmup), or o.settle passes;
// it fails naming the queries that never did and were not expected to
// stay empty. With stopRunners and startRunners, it then waits for
// o.alerts to be inactive, stops the runners, waits for each of o.alerts
// to fire, starts them again and waits for each of o.resolve to resolve,
// logging when each happened.
func observe(t *testing.T, o observation) {
	bin := needPrometheus(t)
	dir := o.dir
	if dir == "" {
		dir = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	if o.alertTimeout == 0 {
		o.alertTimeout = o.defaultAlertTimeout()
	}
	ctx := t.Context()

	p, err := promcheck.Start(ctx, promcheck.Config{Binary: bin, Dir: dir, Targets: o.targets, RuleFiles: ruleFiles(t)})
	require.NoError(t, err)
	t.Cleanup(p.Stop)
	t.Logf("prometheus at %s, log %s", p.URL, p.LogPath)
	upCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, p.WaitTargetsUp(upCtx))

	dash, err := promcheck.DashboardQueries(dashboardGlob)
	require.NoError(t, err)
	expected := func(q promcheck.Query) (string, bool) {
		if o.expectedEmpty == nil {
			return "", false
		}
		return o.expectedEmpty(q)
	}
	begin := time.Now()
	deadline := begin.Add(max(o.settle, o.warmup))
	var results []promcheck.QueryResult
	for {
		results = p.CheckQueries(ctx, dash)
		settled := true
		for _, res := range results {
			if _, ok := expected(res.Query); res.Err != nil || !res.Result.HasData() && !ok {
				settled = false
			}
		}
		if settled && time.Since(begin) >= o.warmup || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(5 * time.Second):
		}
	}
	withData := 0
	for _, res := range results {
		reason, ok := expected(res.Query)
		switch {
		case res.Err == nil && res.Result.HasData():
			withData++
			if ok {
				t.Logf("data, though expected to stay empty (%s): %s", reason, res.Query)
			}
		case res.Err == nil && ok:
			t.Logf("no data, as expected: %s\n    why: %s", res.Query, reason)
		default:
			t.Errorf("no data: %s (err: %v)", res.Query, res.Err)
		}
	}
	t.Logf("%d of %d dashboard queries return data", withData, len(dash))

	if o.stopRunners == nil || o.startRunners == nil {
		t.Log("no way to stop and start the runners: alerts not exercised")
		return
	}
	require.NoError(t, waitAlerts(t, p, o.alerts, "inactive", time.Now(), o.alertTimeout), "alerts fire before the runners stop")
	require.NoError(t, o.stopRunners())
	stopped := time.Now()
	t.Logf("runners stopped at %s", stopped.UTC().Format(time.TimeOnly))
	require.NoError(t, waitAlerts(t, p, o.alerts, "firing", stopped, o.alertTimeout))
	require.NoError(t, o.startRunners())
	started := time.Now()
	t.Logf("runners started at %s", started.UTC().Format(time.TimeOnly))
	require.NoError(t, waitAlerts(t, p, o.resolve, "inactive", started, o.alertTimeout))
}

// waitAlerts waits until every alert of names is in state ("firing",
// "pending", or "inactive": neither), logging when each got there, counted
// from since. It returns an error naming those that did not within timeout.
func waitAlerts(t *testing.T, p *promcheck.Prometheus, names []string, state string, since time.Time, timeout time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	left := slices.Clone(names)
	var last []promcheck.Alert
	for {
		alerts, err := p.Alerts(ctx)
		if err == nil {
			last = alerts
			left = slices.DeleteFunc(left, func(name string) bool {
				// Any alert of the name when waiting for inactive; one
				// in state otherwise.
				i := slices.IndexFunc(alerts, func(a promcheck.Alert) bool {
					return a.Name() == name && (state == "inactive" || a.State == state)
				})
				now := time.Now()
				after := fmt.Sprintf("at %s, %s after %s", now.UTC().Format(time.TimeOnly), now.Sub(since).Round(time.Second), since.UTC().Format(time.TimeOnly))
				switch {
				case state == "inactive" && i < 0:
					t.Logf("%s inactive %s", name, after)
					return true
				case state != "inactive" && i >= 0:
					t.Logf("%s %s %s (pending since %s, value %s)", name, state, after, alerts[i].ActiveAt.UTC().Format(time.TimeOnly), alerts[i].Value)
					return true
				}
				return false
			})
			if len(left) == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("alerts %v not %s within %s; alerts now %v: %w", left, state, timeout, last, errors.Join(ctx.Err(), err))
		case <-time.After(500 * time.Millisecond):
		}
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

func runShell(t *testing.T, command string) error {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "bash", "-c", command).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", command, err, out)
	}
	t.Logf("ran %q", command)
	return nil
}
