package bench

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sundialhq/sundial/loadgen"
)

// Scenarios are the bench's scenarios (bench/README.md describes each).
var Scenarios = []string{"steady", "herd", "crash", "peer"}

// Config is one bench run.
type Config struct {
	// Scenario is one of Scenarios.
	Scenario string `json:"scenario"`
	// Jobs: steady, crash and peer: the number of recurring jobs; herd: the
	// number of runs due in the same second. Defaults: steady 1,000,000;
	// herd 100,000; crash 50,000; peer 100,000.
	Jobs int `json:"jobs"`
	// Rate is the planned triggers/s of steady, crash and peer. Defaults:
	// steady 2,000; crash 500; peer 1,000.
	Rate float64 `json:"rate"`
	// Duration of the measured window. Defaults: steady 3m, crash 3m,
	// peer 2m.
	Duration time.Duration `json:"duration"`
	// Drain: after the window, how long runs due in it may still start
	// before they count as lost. Herd: the longest wait for the herd.
	// Default 60s (herd 10m).
	Drain time.Duration `json:"drain"`
	// Lead: herd: how far ahead the herd is due (the definitions must be
	// accepted before); steady: how long after the recurring jobs are
	// accepted the window starts (the one-offs are registered in it).
	// Defaults: herd 2m + 1ms per job, others 45s.
	Lead time.Duration `json:"lead"`
	// Mix of schedule kinds (steady, crash, peer). Default loadgen.DefaultMix.
	Mix loadgen.Mix `json:"mix"`
	// Shards S of the bench's cluster. Default 128.
	Shards int `json:"shards"`
	// Dispatchers and Runners of the pipeline. Default 1 and 1 (crash: 2
	// and 2, so one survives the kill).
	Dispatchers int `json:"dispatchers"`
	Runners     int `json:"runners"`
	// RunnerConcurrency: workers per runner; 0 keeps the runner's default.
	RunnerConcurrency int `json:"runner_concurrency"`
	// RegistryConcurrency: jobs the registry processes at once (0: the
	// registry's default).
	RegistryConcurrency int `json:"registry_concurrency"`
	// RunnerHTTPIdleConns: see PipelineConfig (in-process only).
	RunnerHTTPIdleConns int `json:"runner_http_idle_conns"`
	// History runs the history writers (as `sundial runner` does). Default
	// true.
	History bool `json:"history"`
	// Processes runs dispatchers and runners as subprocesses (always for
	// crash).
	Processes bool `json:"processes"`
	// DispatcherProcess runs the dispatchers as `sundial dispatcher`
	// subprocesses while the registry and the runners stay in the bench
	// process, so the dispatcher's memory can be read on its own (the
	// report's dispatcher_memory). Processes runs the runners as
	// subprocesses too. `sundial bench` sets it by default.
	DispatcherProcess bool `json:"dispatcher_process"`
	// Binary is the sundial binary for subprocesses; empty: build it.
	Binary string `json:"binary,omitempty"`
	// Target is "http" (the counting downstream; default) or "noop" (the
	// runners' in-process handler: no effects counted).
	Target string `json:"target"`
	// EffectDuration is how long the counting downstream takes to apply
	// one effect, so that two executions of one run at the same time
	// overlap there (a duplicate effect). Default
	// loadgen.DefaultEffectDuration.
	EffectDuration time.Duration `json:"effect_duration"`
	// PayloadBytes of each job's payload. Default 64.
	PayloadBytes int `json:"payload_bytes"`
	// BaselineDuration is how long each of K, R and C is measured. Default
	// 10s.
	BaselineDuration time.Duration `json:"baseline_duration"`
	// Crash: the process killed ("runner", "dispatcher" or "both", one after
	// the other; default both), when (after the window starts; default a
	// third of the window) and for how long it stays down (default 5s).
	CrashKill  string        `json:"crash_kill,omitempty"`
	CrashAfter time.Duration `json:"crash_after,omitempty"`
	CrashDown  time.Duration `json:"crash_down,omitempty"`
	// Asynq peer: delayed-task check interval (default asynq's 5s) and
	// worker count (default: runners × concurrency of the Sundial run).
	AsynqDelayedCheck time.Duration `json:"asynq_delayed_check,omitempty"`
	AsynqConcurrency  int           `json:"asynq_concurrency,omitempty"`
	// Keep leaves the namespace (topics, keyspace, keys) in place.
	Keep bool `json:"keep"`
	// ResultsDir: the report goes to ResultsDir/<timestamp>-<scenario>.
	// Default bench/results.
	ResultsDir string `json:"-"`
	// Pipeline is filled in by the run: how the pipeline ran.
	Pipeline string `json:"pipeline"`
}

// WithDefaults fills in the scenario's defaults.
func (c Config) WithDefaults() Config {
	def := map[string]struct {
		jobs     int
		rate     float64
		duration time.Duration
	}{
		"steady": {1_000_000, 2000, 3 * time.Minute},
		"herd":   {100_000, 0, 0},
		"crash":  {50_000, 500, 3 * time.Minute},
		"peer":   {100_000, 1000, 2 * time.Minute},
	}[c.Scenario]
	c.Jobs = cmp.Or(c.Jobs, def.jobs)
	c.Rate = cmp.Or(c.Rate, def.rate)
	c.Duration = cmp.Or(c.Duration, def.duration)
	if c.Scenario == "herd" {
		c.Drain = cmp.Or(c.Drain, 10*time.Minute)
		c.Lead = cmp.Or(c.Lead, 2*time.Minute+time.Duration(c.Jobs)*time.Millisecond)
	} else {
		c.Drain = cmp.Or(c.Drain, time.Minute)
		c.Lead = cmp.Or(c.Lead, 45*time.Second)
	}
	if c.Mix == (loadgen.Mix{}) {
		c.Mix = loadgen.DefaultMix
	}
	c.Shards = cmp.Or(c.Shards, 128)
	if c.Scenario == "crash" {
		c.Processes = true
		c.Dispatchers = cmp.Or(c.Dispatchers, 2)
		c.Runners = cmp.Or(c.Runners, 2)
		c.CrashKill = cmp.Or(c.CrashKill, "both")
		c.CrashAfter = cmp.Or(c.CrashAfter, c.Duration/3)
		c.CrashDown = cmp.Or(c.CrashDown, 5*time.Second)
	}
	c.Dispatchers = cmp.Or(c.Dispatchers, 1)
	c.Runners = cmp.Or(c.Runners, 1)
	c.Target = cmp.Or(c.Target, "http")
	c.PayloadBytes = cmp.Or(c.PayloadBytes, 64)
	c.EffectDuration = cmp.Or(c.EffectDuration, loadgen.DefaultEffectDuration)
	c.BaselineDuration = cmp.Or(c.BaselineDuration, 10*time.Second)
	c.ResultsDir = cmp.Or(c.ResultsDir, "bench/results")
	return c
}

// Validate reports every bad field, after defaults.
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("bench config: "+format, args...)) }
	if !slices.Contains(Scenarios, c.Scenario) {
		bad("scenario %q: want one of %s", c.Scenario, strings.Join(Scenarios, ", "))
	}
	if c.Jobs < 1 || c.Jobs > loadgen.MaxJobs {
		bad("jobs %d: must be in [1, %d]", c.Jobs, loadgen.MaxJobs)
	}
	if c.Scenario != "herd" && !(c.Rate > 0) {
		bad("rate %v: must be positive", c.Rate)
	}
	if c.Scenario != "herd" && c.Duration < 10*time.Second {
		bad("duration %s: must be at least 10s", c.Duration)
	}
	if c.Drain < 0 || c.Lead < 0 {
		bad("drain %s, lead %s: must not be negative", c.Drain, c.Lead)
	}
	if c.Shards < 1 || c.Shards > 4096 {
		bad("shards %d: must be in [1, 4096]", c.Shards)
	}
	if c.Dispatchers < 1 || c.Runners < 1 {
		bad("dispatchers %d, runners %d: need at least one of each", c.Dispatchers, c.Runners)
	}
	if c.Target != "http" && c.Target != "noop" {
		bad("target %q: want http or noop", c.Target)
	}
	if c.Scenario == "crash" {
		if c.CrashKill != "runner" && c.CrashKill != "dispatcher" && c.CrashKill != "both" {
			bad("crash kill %q: want runner, dispatcher or both", c.CrashKill)
		}
		n := time.Duration(1)
		if c.CrashKill == "both" {
			n = 2
		}
		if n*c.CrashAfter+c.CrashDown >= c.Duration {
			bad("crash after %s (each of %d kills) and down %s do not fit in the window %s", c.CrashAfter, n, c.CrashDown, c.Duration)
		}
	}
	if c.EffectDuration < 0 || c.EffectDuration > time.Minute {
		bad("effect duration %s: must be in [0, 1m]", c.EffectDuration)
	}
	if c.RunnerConcurrency < 0 || c.AsynqConcurrency < 0 || c.RunnerHTTPIdleConns < 0 {
		bad("concurrencies must not be negative")
	}
	return errors.Join(errs...)
}

// String is the one-line configuration of the report.
func (c Config) String() string {
	s := fmt.Sprintf("scenario %s; %s; shards %d; drain %s; lead %s; baselines %s each",
		c.Scenario, c.Pipeline, c.Shards, c.Drain, c.Lead, c.BaselineDuration)
	if c.Scenario == "crash" {
		s += fmt.Sprintf("; kill %s %s into the window, down %s", c.CrashKill, c.CrashAfter, c.CrashDown)
	}
	if c.Scenario == "peer" {
		s += fmt.Sprintf("; asynq delayed-task check %s, %d workers", c.AsynqDelayedCheck, c.AsynqConcurrency)
	}
	return s
}
