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
var Scenarios = []string{"steady", "herd", "crash", "peer", "chaos", "capacity", "workers"}

// Config is one bench run.
type Config struct {
	// Scenario is one of Scenarios.
	Scenario string `json:"scenario"`
	// Jobs: steady, crash, peer and workers: the number of recurring jobs;
	// herd: the number of runs due in the same second. Defaults: steady
	// 1,000,000; herd 100,000; crash 50,000; peer 100,000; workers 30,000.
	// Capacity does not use it:
	// each step defines rate × CapacityPeriod interval jobs.
	Jobs int `json:"jobs"`
	// Rate is the planned triggers/s of steady, crash, peer and workers,
	// and the first step's rate of capacity. Defaults: steady 2,000; crash
	// 500; peer 1,000; capacity 250; workers 500.
	Rate float64 `json:"rate"`
	// Duration of the measured window (capacity: of each step). Defaults:
	// steady 3m, crash 3m, peer 2m, capacity 30s (bench/README.md says
	// why 30s is enough for a step), workers 2m.
	Duration time.Duration `json:"duration"`
	// MaxRate: capacity: the highest rate a step offers. Default L, rounded.
	MaxRate float64 `json:"max_rate,omitempty"`
	// CapacitySteps: capacity: the most steps the search runs. Default 10.
	CapacitySteps int `json:"capacity_steps,omitempty"`
	// Drain: after the window, how long runs due in it may still start
	// before they count as lost. Herd: the longest wait for the herd.
	// Chaos: the same, then as long again for the DAG runs to end.
	// Default 60s (herd 10m, chaos 5m).
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
	// MemoryLimitMiB is the --memory-limit-mib of the dispatcher and
	// runner subprocesses (0: none).
	MemoryLimitMiB int `json:"memory_limit_mib,omitempty"`
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
	// Splay: herd only: spread the herd's runs over this window after its
	// instant (JobSpec.splay; loadgen.Workload.Splay). Zero: none.
	Splay time.Duration `json:"splay,omitempty"`
	// BaselineDuration is how long each of the BaselineSamples
	// measurements of K, R and C lasts, after a discarded warm-up of half
	// as long (so the baselines take 3.5 × it each). Default 10s.
	BaselineDuration time.Duration `json:"baseline_duration"`
	// Crash: the process killed ("runner", "dispatcher" or "both", one after
	// the other; default both), when (after the window starts; default a
	// third of the window) and for how long it stays down (default 5s).
	CrashKill  string        `json:"crash_kill,omitempty"`
	CrashAfter time.Duration `json:"crash_after,omitempty"`
	CrashDown  time.Duration `json:"crash_down,omitempty"`
	// DagEngines: chaos: `sundial dag engine` subprocesses. Default 2.
	DagEngines int `json:"dag_engines,omitempty"`
	// Dags, DagNodes, DagEvery: chaos: the DAGs that run throughout: how
	// many, nodes in each chain, how often each fires. Defaults 20, 3,
	// 10s.
	Dags     int           `json:"dags,omitempty"`
	DagNodes int           `json:"dag_nodes,omitempty"`
	DagEvery time.Duration `json:"dag_every,omitempty"`
	// ChaosEvery: chaos: the interval between two process kills (a random
	// dispatcher, runner or DAG engine). Default 30s.
	ChaosEvery time.Duration `json:"chaos_every,omitempty"`
	// ChaosProcessDown: how long a killed process stays down. Default 2s.
	ChaosProcessDown time.Duration `json:"chaos_process_down,omitempty"`
	// ChaosBackendDown: how long a killed backend stays down before its
	// restart. Default 5s.
	ChaosBackendDown time.Duration `json:"chaos_backend_down,omitempty"`
	// ChaosBackends are killed once each, in this order. Default redis,
	// kafka, cassandra; "none" (alone) kills no backend.
	ChaosBackends []string `json:"chaos_backends,omitempty"`
	// ChaosSeed makes the choice of victims repeatable; 0: from the clock.
	ChaosSeed uint64 `json:"chaos_seed,omitempty"`
	// StackScript is deploy/local/stack.sh of the stack the backends run
	// in: chaos kills and restarts them through it, and refuses to run
	// when it does not answer for the bench's backends. Default
	// deploy/local/stack.sh.
	StackScript string `json:"stack_script,omitempty"`
	// Asynq peer: delayed-task check interval (default asynq's 5s) and
	// worker count (default: runners × concurrency of the Sundial run).
	AsynqDelayedCheck time.Duration `json:"asynq_delayed_check,omitempty"`
	AsynqConcurrency  int           `json:"asynq_concurrency,omitempty"`
	// Workers: workers: the `sundial bench worker` processes of the SDK
	// system. Default 2.
	Workers int `json:"workers,omitempty"`
	// WorkerSlots: workers: each SDK worker's Concurrency. Default: the
	// stock runners' workers (Runners × RunnerConcurrency, the runner's
	// default when 0) shared among Workers, so that both systems execute
	// as many runs at once.
	WorkerSlots int `json:"worker_slots,omitempty"`
	// Noisy runs a CPU hog on one core (Hog) beside the pipeline, from the
	// end of the baselines to the end of the run, so the run shows how the
	// pipeline degrades when another tenant takes a core.
	Noisy bool `json:"noisy"`
	// APIWatch serves the control-plane API (APIWatch) in the bench
	// process beside the pipeline, from the end of the baselines to the end
	// of the pipeline's run, with a client reading WatchRuns of every run
	// through it, so the run shows what a busy watch stream costs the
	// pipeline. The report counts the messages the client received.
	APIWatch bool `json:"api_watch"`
	// ProfileSpan is how long the CPU profiles of the bench process and of
	// the pipeline's subprocesses last, in the middle of the measured
	// window (the whole window when it is shorter). Default
	// DefaultProfileSpan; at least 1s.
	ProfileSpan time.Duration `json:"profile_span"`
	// Keep leaves the namespace (topics, keyspace, keys) in place.
	Keep bool `json:"keep"`
	// ResultsDir: the report goes to ResultsDir/<timestamp>-<scenario>.
	// Default bench/results.
	ResultsDir string `json:"-"`
	// Pipeline is filled in by the run: how the pipeline ran.
	Pipeline string `json:"pipeline"`

	// jobPrefix is the job id prefix of a capacity step's workload; empty:
	// the namespace's id.
	jobPrefix string
	// viaWorkers: workers: this run of the pipeline is the SDK system's:
	// its runners lack WorkersHandler and hand the runs to the gateway,
	// whose SDK workers (Workers) execute them.
	viaWorkers bool
}

// WithDefaults fills in the scenario's defaults.
func (c Config) WithDefaults() Config {
	sc := scenarioNamed(c.Scenario)
	jobs, rate, duration := sc.sizes(c)
	c.Rate = cmp.Or(c.Rate, rate)
	c.Jobs = cmp.Or(c.Jobs, jobs)
	c.Duration = cmp.Or(c.Duration, duration)
	sc.defaults(&c)
	c.Drain = cmp.Or(c.Drain, time.Minute)
	c.Lead = cmp.Or(c.Lead, 45*time.Second)
	if c.Mix == (loadgen.Mix{}) {
		c.Mix = loadgen.DefaultMix
	}
	c.Shards = cmp.Or(c.Shards, 128)
	c.Dispatchers = cmp.Or(c.Dispatchers, 1)
	c.Runners = cmp.Or(c.Runners, 1)
	c.Target = cmp.Or(c.Target, "http")
	c.PayloadBytes = cmp.Or(c.PayloadBytes, 64)
	c.EffectDuration = cmp.Or(c.EffectDuration, loadgen.DefaultEffectDuration)
	c.BaselineDuration = cmp.Or(c.BaselineDuration, 10*time.Second)
	c.ProfileSpan = cmp.Or(c.ProfileSpan, DefaultProfileSpan)
	c.ResultsDir = cmp.Or(c.ResultsDir, "bench/results")
	return c
}

// Validate reports every bad field, after defaults.
func (c Config) Validate() error {
	c = c.WithDefaults()
	sc := scenarioNamed(c.Scenario)
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("bench config: "+format, args...)) }
	if !slices.Contains(Scenarios, c.Scenario) {
		bad("scenario %q: want one of %s", c.Scenario, strings.Join(Scenarios, ", "))
	}
	if c.Jobs < 1 || c.Jobs > loadgen.MaxJobs {
		bad("jobs %d: must be in [1, %d]", c.Jobs, loadgen.MaxJobs)
	}
	if !sc.instant() && !(c.Rate > 0) {
		bad("rate %v: must be positive", c.Rate)
	}
	if !sc.instant() && c.Duration < 10*time.Second {
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
	if c.Splay != 0 && c.Scenario != "herd" {
		bad("splay %s: only the herd scenario is splayed", c.Splay)
	}
	if c.Target != "http" && c.Target != "noop" {
		bad("target %q: want http or noop", c.Target)
	}
	sc.validate(c, bad)
	if c.ProfileSpan < time.Second {
		bad("profile span %s: must be at least 1s", c.ProfileSpan)
	}
	if c.EffectDuration < 0 || c.EffectDuration > time.Minute {
		bad("effect duration %s: must be in [0, 1m]", c.EffectDuration)
	}
	if c.RunnerConcurrency < 0 || c.AsynqConcurrency < 0 || c.RunnerHTTPIdleConns < 0 || c.MemoryLimitMiB < 0 || c.Workers < 0 || c.WorkerSlots < 0 {
		bad("concurrencies must not be negative")
	}
	return errors.Join(errs...)
}

// String is the one-line configuration of the report.
func (c Config) String() string {
	s := fmt.Sprintf("scenario %s; %s; shards %d; drain %s; lead %s; baselines %s each",
		c.Scenario, c.Pipeline, c.Shards, c.Drain, c.Lead, c.BaselineDuration)
	s += scenarioNamed(c.Scenario).describe(c)
	if c.Noisy {
		s += "; noisy: a CPU hog busy on one core beside the pipeline"
	}
	if c.APIWatch {
		s += "; api-watch: the API server streaming WatchRuns of every run to a client beside the pipeline"
	}
	return s
}

// chaosPlan is the chaos plan of the configuration, killing among names
// (nil: the names the pipeline's subprocesses will have).
func (c Config) chaosPlan(names []string) ChaosPlan {
	if names == nil {
		for i := range c.Dispatchers {
			names = append(names, fmt.Sprintf("dispatcher-%d", i))
		}
		for i := range c.Runners {
			names = append(names, fmt.Sprintf("runner-%d", i))
		}
		for i := range c.DagEngines {
			names = append(names, fmt.Sprintf("dagengine-%d", i))
		}
	}
	return ChaosPlan{Window: c.Duration, Every: c.ChaosEvery, Processes: names, Backends: c.chaosBackends(), Seed: c.ChaosSeed}
}

// chaosBackends are the backends a chaos run kills: ChaosBackends, or none
// for ["none"].
func (c Config) chaosBackends() []string {
	if len(c.ChaosBackends) == 1 && c.ChaosBackends[0] == "none" {
		return nil
	}
	return c.ChaosBackends
}

// peerWorkers is how many tasks a peer executes at once: --asynq-concurrency
// when set, else as many as Sundial's runners execute together, so that
// every system of a peer run has the same concurrency.
func (c Config) peerWorkers() int {
	return cmp.Or(c.AsynqConcurrency, c.Runners*cmp.Or(c.RunnerConcurrency, 64))
}
