package bench

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sundialhq/sundial/internal/telemetry"
	"github.com/sundialhq/sundial/loadgen"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// scenario is what one bench scenario changes in a run: its defaults and
// checks, the workload it shapes, the pipeline it asks for, what it does
// to the pipeline during the window, what it adds after the drain and the
// targets its report is held to. Everything else (baselines, registration,
// the window, the drain, the counts) is the same for every scenario and
// lives in Bench.Run and Bench.runSundial.
//
// A scenario holds no state of its own: what one run needs between the
// hooks is in sundialRun. scenarios maps each name of Scenarios to one.
type scenario interface {
	// sizes are the default jobs, rate and window of the scenario, for
	// the configuration c as given.
	sizes(c Config) (jobs int, rate float64, duration time.Duration)
	// defaults fills the scenario's own defaults, after the jobs, the
	// rate and the window (from sizes) and before the settings shared by
	// every scenario.
	defaults(c *Config)
	// validate reports the scenario's bad settings through bad.
	validate(c Config, bad func(format string, args ...any))
	// describe is what the scenario adds to Config.String.
	describe(c Config) string
	// instant reports whether the workload falls due at one instant (a
	// herd) rather than at a rate over a window.
	instant() bool

	// prepare checks, before anything is created, what the run needs,
	// and fills what is drawn at run time (a chaos seed).
	prepare(ctx context.Context, b *Bench, cfg *Config, start time.Time) error
	// shape adjusts the workload before its plan is built.
	shape(w *loadgen.Workload)
	// perRun adjusts the backend work of one run (the B baseline).
	perRun(p *PerRun)
	// measure runs the workload through Sundial.
	measure(ctx context.Context, b *Bench, cfg *Config, ns Namespace, bl Baselines, rep *Report) (System, WorkloadInfo, error)
	// peers runs the workload through the systems Sundial is compared
	// with, if any.
	peers(ctx context.Context, b *Bench, cfg *Config, ns Namespace) ([]System, error)

	// pipeline adjusts the pipeline's configuration; supervise: a
	// subprocess that exits is started again, as a supervisor would.
	pipeline(c Config, pc *PipelineConfig) (supervise bool)
	// step reports whether a run of runSundial is one step of many (a
	// capacity search): its window is too short to watch the
	// registration, the CPU or the profiles, and its jobs are deleted
	// after it.
	step() bool
	// inject prepares what the scenario does to the pipeline during the
	// window; the returned function, if not nil, runs beside the window
	// and returns the kills it made.
	inject(ctx context.Context, b *Bench, r *sundialRun) (func() []CrashEvent, error)
	// settle runs after the drain and adds the scenario's results.
	settle(ctx context.Context, b *Bench, r *sundialRun, sys *System) error

	// targets are the targets the report is held to; s is Sundial's
	// system.
	targets(c Config, r *Report, s System, add addTarget)
	// plots are the scenario's own plots, beside those every report has.
	plots() []reportPlot
}

// addTarget adds one target to a report.
type addTarget func(name, want string, v float64, met bool)

// reportPlot is one plot of a report: its file, what it shows, and how it
// is drawn.
type reportPlot struct {
	File  string
	About string
	Draw  func(r *Report, path string) error
}

// sundialRun is what one run of runSundial shares between a scenario's
// hooks.
type sundialRun struct {
	cfg      *Config
	ns       Namespace
	procs    *Processes // nil for an in-process pipeline
	ds       *loadgen.Downstream
	gen      *loadgen.Generator
	plan     *loadgen.Plan
	from, to time.Time
	crashes  []CrashEvent

	// pl is the pipeline; workBefore and workAfter its components'
	// backend work at the start and at the end of the window (nil when
	// not read).
	pl                    pipeline
	workBefore, workAfter map[string]telemetry.Work

	dags  DagWorkload // chaos: the DAGs defined for the window
	chaos *ChaosInfo  // chaos: the plan and what happened
}

// scenarios maps each name of Scenarios to its scenario.
var scenarios = map[string]scenario{
	"steady":   steadyScenario{},
	"herd":     herdScenario{},
	"crash":    crashScenario{},
	"peer":     peerScenario{},
	"chaos":    chaosScenario{},
	"capacity": capacityScenario{},
	"workers":  workersScenario{},
}

// scenarioNamed is the scenario of name; an unknown name (which Validate
// reports) is a scenario with no defaults and no hooks.
func scenarioNamed(name string) scenario {
	if s, ok := scenarios[name]; ok {
		return s
	}
	return baseScenario{}
}

// baseScenario is the scenario that changes nothing; each scenario embeds
// it and overrides the hooks it differs in.
type baseScenario struct{}

func (baseScenario) sizes(Config) (int, float64, time.Duration)                { return 0, 0, 0 }
func (baseScenario) defaults(*Config)                                          {}
func (baseScenario) validate(Config, func(string, ...any))                     {}
func (baseScenario) describe(Config) string                                    { return "" }
func (baseScenario) instant() bool                                             { return false }
func (baseScenario) prepare(context.Context, *Bench, *Config, time.Time) error { return nil }
func (baseScenario) shape(*loadgen.Workload)                                   {}
func (baseScenario) perRun(*PerRun)                                            {}

func (baseScenario) measure(ctx context.Context, b *Bench, cfg *Config, ns Namespace, _ Baselines, _ *Report) (System, WorkloadInfo, error) {
	return b.runSundial(ctx, cfg, ns)
}

func (baseScenario) peers(context.Context, *Bench, *Config, Namespace) ([]System, error) {
	return nil, nil
}
func (baseScenario) pipeline(Config, *PipelineConfig) bool { return false }
func (baseScenario) step() bool                            { return false }
func (baseScenario) inject(context.Context, *Bench, *sundialRun) (func() []CrashEvent, error) {
	return nil, nil
}
func (baseScenario) settle(context.Context, *Bench, *sundialRun, *System) error { return nil }
func (baseScenario) targets(_ Config, _ *Report, s System, add addTarget)       { lossTarget(s, add) }
func (baseScenario) plots() []reportPlot                                        { return nil }

// latencyTargets are the trigger latency targets of a steady load.
func latencyTargets(s System, add addTarget) {
	add("trigger p95 (ms)", "≤ 100", s.Trigger.P95Ms, s.Trigger.P95Ms <= 100)
	add("trigger p99 (ms)", "≤ 250", s.Trigger.P99Ms, s.Trigger.P99Ms <= 250)
}

// lossTarget is the target every scenario but chaos (which counts its
// losses itself) ends with.
func lossTarget(s System, add addTarget) {
	noLoss := s.Counts.Lost == 0 && s.Counts.DuplicateExecutions == 0 && s.Effects.DuplicateEffects == 0
	add("lost + duplicate executions + duplicate effects", "0", float64(s.Counts.Lost+s.Counts.DuplicateExecutions+s.Effects.DuplicateEffects), noLoss)
}

// steadyScenario: a million jobs at a steady rate.
type steadyScenario struct{ baseScenario }

func (steadyScenario) sizes(Config) (int, float64, time.Duration) {
	return 1_000_000, 2000, 3 * time.Minute
}

func (steadyScenario) targets(_ Config, r *Report, s System, add addTarget) {
	latencyTargets(s, add)
	add("jobs stored", "1,000,000", float64(r.Workload.Jobs), r.Workload.Jobs >= 1_000_000)
	// The offered rate is the runs the workload makes due in the window
	// per second of it: the planned rate less the rounding of the
	// workload's grid (1,999.6/s for 2,000 planned). Runs due in the last
	// instants that start after the window ends are not counted, hence
	// 99 %.
	offered := safeDiv(float64(s.Counts.Expected), r.Workload.WindowTo.Sub(r.Workload.WindowFrom).Seconds())
	add("sustained triggers/s", fmt.Sprintf("≥ 99 %% of the %.0f/s offered", offered), s.SustainedPerSec,
		offered > 0 && s.SustainedPerSec >= 0.99*offered)
	add("sustained / B", "≥ 0.60", s.FractionOfB, s.FractionOfB >= 0.6)
	if r.Workload.Jobs >= 1_000_000 {
		for _, m := range []struct {
			role string
			mem  *ProcessMemory
		}{{"dispatcher", s.DispatcherMemory}, {"runner", s.RunnerMemory}} {
			if m.mem != nil {
				add(m.role+" RSS over the whole run (MiB)", "≤ 256", m.mem.PeakHWMMiB, m.mem.PeakHWMMiB > 0 && m.mem.PeakHWMMiB <= 256)
			}
		}
	}
	lossTarget(s, add)
}

// herdScenario: one-off jobs all due at one instant.
type herdScenario struct{ baseScenario }

func (herdScenario) sizes(Config) (int, float64, time.Duration) { return 100_000, 0, 0 }

func (herdScenario) defaults(c *Config) {
	c.Drain = cmp.Or(c.Drain, 10*time.Minute)
	c.Lead = cmp.Or(c.Lead, 2*time.Minute+time.Duration(c.Jobs)*time.Millisecond)
}

func (herdScenario) instant() bool { return true }

// shape: the herd falls due when the workload starts, Lead from now.
func (herdScenario) shape(w *loadgen.Workload) { w.HerdAt = w.Start }

func (herdScenario) perRun(p *PerRun) {
	p.CassandraWrites = 0
	p.Explanation = "dispatcher: run record + ENQUEUED event (a one-off has no next occurrence), no read; runner: acquire + complete EVALSHA, SUCCEEDED event carrying the start (STARTED elided)"
}

func (herdScenario) targets(_ Config, r *Report, s System, add addTarget) {
	limit := 1.25 * float64(r.Workload.Jobs) / r.Baselines.B
	if r.Workload.SplayMs > 0 {
		// A splayed herd is asked to take its window: its runs are on time
		// when each starts at its own splayed instant (trigger p99 ≤ 1 s).
		add("splayed herd: trigger p99 (ms) from each run's splayed instant", "≤ 1000", s.Trigger.P99Ms, s.Trigger.P99Ms <= 1000)
		lossTarget(s, add)
		return
	}
	add(fmt.Sprintf("herd drained (s), limit 1.25 × %d / B", r.Workload.Jobs), fmt.Sprintf("≤ %.1f", limit), s.HerdDrainSeconds,
		s.HerdDrainSeconds > 0 && s.HerdDrainSeconds <= limit)
	add("herd drain rate / L", "≥ 0.50", s.FractionOfL, s.HerdDrainSeconds > 0 && s.FractionOfL >= 0.5)
	lossTarget(s, add)
}

// crashScenario: a runner and a dispatcher killed and restarted during the
// window.
type crashScenario struct{ baseScenario }

func (crashScenario) sizes(Config) (int, float64, time.Duration) { return 50_000, 500, 3 * time.Minute }

func (crashScenario) defaults(c *Config) {
	c.Processes = true
	c.Dispatchers = cmp.Or(c.Dispatchers, 2)
	c.Runners = cmp.Or(c.Runners, 2)
	c.CrashKill = cmp.Or(c.CrashKill, "both")
	c.CrashAfter = cmp.Or(c.CrashAfter, c.Duration/3)
	c.CrashDown = cmp.Or(c.CrashDown, 5*time.Second)
}

func (crashScenario) validate(c Config, bad func(string, ...any)) {
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

func (crashScenario) describe(c Config) string {
	return fmt.Sprintf("; kill %s %s into the window, down %s", c.CrashKill, c.CrashAfter, c.CrashDown)
}

func (crashScenario) inject(ctx context.Context, b *Bench, r *sundialRun) (func() []CrashEvent, error) {
	if r.procs == nil {
		return nil, nil
	}
	return func() []CrashEvent { return b.crash(ctx, *r.cfg, r.procs, r.from) }, nil
}

func (crashScenario) targets(_ Config, _ *Report, s System, add addTarget) {
	latencyTargets(s, add)
	lossTarget(s, add)
}

// peerScenario: the same workload through Sundial, through asynq and,
// when a PostgreSQL is given, through River.
type peerScenario struct{ baseScenario }

func (peerScenario) sizes(Config) (int, float64, time.Duration) {
	return 100_000, 1000, 2 * time.Minute
}

func (peerScenario) describe(c Config) string {
	return fmt.Sprintf("; asynq delayed-task check %s, %d workers per peer", c.AsynqDelayedCheck, c.AsynqConcurrency)
}

func (peerScenario) peers(ctx context.Context, b *Bench, cfg *Config, ns Namespace) ([]System, error) {
	asynqSys, err := b.runAsynq(ctx, cfg, ns)
	if err != nil {
		return nil, fmt.Errorf("peer asynq: %w", err)
	}
	out := []System{asynqSys}
	if b.Backends.PostgresURL == "" {
		b.say("peer: no --postgres-url, so no River peer (deploy/local/postgres.sh up starts one)")
		return out, nil
	}
	riverSys, err := b.runRiver(ctx, cfg, ns)
	if err != nil {
		return nil, fmt.Errorf("peer river: %w", err)
	}
	return append(out, riverSys), nil
}

func (peerScenario) targets(_ Config, r *Report, s System, add addTarget) {
	latencyTargets(s, add)
	lossTarget(s, add)
	for _, p := range r.Systems[1:] {
		add(fmt.Sprintf("sundial p95 / %s p95", p.Name), "≤ 0.10", safeDiv(s.Trigger.P95Ms, p.Trigger.P95Ms), safeDiv(s.Trigger.P95Ms, p.Trigger.P95Ms) <= 0.1)
		add(p.Name+" lost", "0", float64(p.Counts.Lost), p.Counts.Lost == 0)
	}
}

// chaosScenario: processes and backends killed at random through a long
// window, with DAGs running beside the jobs.
type chaosScenario struct{ baseScenario }

func (chaosScenario) sizes(Config) (int, float64, time.Duration) {
	return 60_000, 1000, 10 * time.Minute
}

func (chaosScenario) defaults(c *Config) {
	// A backend outage leaves a backlog behind it; the drain gives it
	// time to run before anything counts as lost.
	c.Drain = cmp.Or(c.Drain, 5*time.Minute)
	c.Processes = true
	c.Dispatchers = cmp.Or(c.Dispatchers, 3)
	c.Runners = cmp.Or(c.Runners, 3)
	c.DagEngines = cmp.Or(c.DagEngines, 2)
	c.Dags = cmp.Or(c.Dags, 20)
	c.DagNodes = cmp.Or(c.DagNodes, 3)
	c.DagEvery = cmp.Or(c.DagEvery, 10*time.Second)
	c.ChaosEvery = cmp.Or(c.ChaosEvery, 30*time.Second)
	c.ChaosProcessDown = cmp.Or(c.ChaosProcessDown, 2*time.Second)
	c.ChaosBackendDown = cmp.Or(c.ChaosBackendDown, 5*time.Second)
	if len(c.ChaosBackends) == 0 {
		c.ChaosBackends = slices.Clone(StackBackends)
	}
	c.StackScript = cmp.Or(c.StackScript, "deploy/local/stack.sh")
}

func (chaosScenario) validate(c Config, bad func(string, ...any)) {
	if c.Dispatchers < 2 || c.Runners < 2 || c.DagEngines < 2 {
		bad("dispatchers %d, runners %d, dag engines %d: chaos needs at least 2 of each, so one survives each kill", c.Dispatchers, c.Runners, c.DagEngines)
	}
	if c.Dags < 1 || c.DagNodes < 1 || c.DagNodes > 20 || c.DagEvery < time.Second {
		bad("dags %d, dag nodes %d, dag every %s: need at least 1 DAG of 1 to 20 nodes, firing at most once a second", c.Dags, c.DagNodes, c.DagEvery)
	}
	if c.ChaosProcessDown < 0 || c.ChaosBackendDown < 0 {
		bad("chaos process down %s, backend down %s: must not be negative", c.ChaosProcessDown, c.ChaosBackendDown)
	}
	for _, b := range c.chaosBackends() {
		if !slices.Contains(StackBackends, b) {
			bad("chaos backend %q: want some of %s, or none", b, strings.Join(StackBackends, ", "))
		}
	}
	if _, err := c.chaosPlan(nil).Kills(); err != nil {
		bad("%v", err)
	}
}

func (chaosScenario) describe(c Config) string {
	return fmt.Sprintf("; a process kill every %s (down %s), backends %v killed once each (down %s), %d dag engines, %d DAGs of %d nodes every %s",
		c.ChaosEvery, c.ChaosProcessDown, c.chaosBackends(), c.ChaosBackendDown, c.DagEngines, c.Dags, c.DagNodes, c.DagEvery)
}

func (chaosScenario) prepare(ctx context.Context, b *Bench, cfg *Config, start time.Time) error {
	// Refuse before anything is created: a run that cannot restart the
	// backends it kills would leave the stack down.
	if err := (Stack{Script: cfg.StackScript}).Check(ctx, b.Backends); err != nil {
		return err
	}
	if slices.Contains(cfg.chaosBackends(), "cassandra") {
		if err := CheckCommitLog(ctx, b.Backends.CassandraHosts); err != nil {
			return err
		}
	}
	if cfg.ChaosSeed == 0 {
		cfg.ChaosSeed = uint64(start.UnixNano())
	}
	return nil
}

func (chaosScenario) shape(w *loadgen.Workload) {
	// Every occurrence missed while a backend is down must still run
	// (late) for "lost" to mean lost.
	w.Misfire = sundialv1.MisfirePolicy_MISFIRE_POLICY_FIRE_ALL
}

func (chaosScenario) pipeline(c Config, pc *PipelineConfig) bool {
	pc.DagEngines = c.DagEngines
	// A chaos run kills backends: a subprocess that exits because one is
	// down is started again, as a supervisor would, and recorded.
	return true
}

func (chaosScenario) inject(ctx context.Context, b *Bench, r *sundialRun) (func() []CrashEvent, error) {
	cfg := r.cfg
	r.dags = DagWorkload{Prefix: r.ns.ID, Count: cfg.Dags, Nodes: cfg.DagNodes, Every: cfg.DagEvery, Start: r.from, URL: r.ds.URL()}
	if err := b.defineDags(ctx, r.dags, r.procs); err != nil {
		return nil, err
	}
	kills, err := cfg.chaosPlan(r.procs.Names()).Kills()
	if err != nil {
		return nil, err
	}
	r.chaos = &ChaosInfo{Seed: cfg.ChaosSeed, EverySeconds: cfg.ChaosEvery.Seconds(), ProcessDownSecs: cfg.ChaosProcessDown.Seconds(),
		BackendDownSecs: cfg.ChaosBackendDown.Seconds(), Plan: kills}
	b.say("chaos: %d kills planned (seed %d)", len(kills), cfg.ChaosSeed)
	return func() []CrashEvent {
		return b.chaos(ctx, *cfg, kills, r.procs, Stack{Script: cfg.StackScript}, r.from)
	}, nil
}

func (chaosScenario) settle(ctx context.Context, b *Bench, r *sundialRun, sys *System) error {
	dc, err := b.drainDags(ctx, r.cfg.Drain, r.dags, r.procs, r.from, r.to)
	if err != nil {
		return err
	}
	sys.Dags = &dc
	r.chaos.Exits = r.procs.Exits()
	r.chaos.countKills(r.crashes)
	sys.Chaos = r.chaos
	return nil
}

func (chaosScenario) targets(c Config, _ *Report, s System, add addTarget) { chaosTargets(c, s, add) }

func (chaosScenario) plots() []reportPlot {
	return []reportPlot{{File: "chaos-timeline.png", About: "per-second p50, p99 and max on a log scale, every kill marked", Draw: PlotTimeline}}
}

// capacityScenario: steps of rising rate until the trigger p95 passes a
// second.
type capacityScenario struct{ baseScenario }

// sizes: the jobs are only the size of the baselines' run record (each
// step defines its own): the first step's workload, since a workload of
// fewer jobs than that would need intervals under a second.
func (capacityScenario) sizes(c Config) (int, float64, time.Duration) {
	rate := cmp.Or(c.Rate, 250)
	return max(1000, int(math.Ceil(rate*CapacityPeriod.Seconds()))), rate, 30 * time.Second
}

func (capacityScenario) defaults(c *Config) {
	// A step that keeps up has started everything a few seconds after
	// its window; one that does not has failed on p95 already.
	c.Drain = cmp.Or(c.Drain, 15*time.Second)
	c.Lead = cmp.Or(c.Lead, 10*time.Second)
	c.CapacitySteps = cmp.Or(c.CapacitySteps, 10)
}

func (capacityScenario) validate(c Config, bad func(string, ...any)) {
	if c.MaxRate != 0 && c.MaxRate < c.Rate {
		bad("max rate %v: must be at least the first step's rate %v", c.MaxRate, c.Rate)
	}
	if c.CapacitySteps < 1 {
		bad("capacity steps %d: must be at least 1", c.CapacitySteps)
	}
}

func (capacityScenario) describe(c Config) string {
	s := fmt.Sprintf("; capacity: steps of %s from %.0f/s, at most %d steps", c.Duration, c.Rate, c.CapacitySteps)
	if c.MaxRate > 0 {
		s += fmt.Sprintf(" and %.0f/s", c.MaxRate)
	}
	return s
}

func (capacityScenario) measure(ctx context.Context, b *Bench, cfg *Config, ns Namespace, bl Baselines, rep *Report) (System, WorkloadInfo, error) {
	sys, wl, capa, err := b.capacity(ctx, cfg, ns, bl)
	rep.Capacity = capa
	return sys, wl, err
}

func (capacityScenario) step() bool { return true }

func (capacityScenario) settle(ctx context.Context, b *Bench, r *sundialRun, _ *System) error {
	b.deleteJobs(ctx, r.gen, r.plan.Jobs)
	return nil
}

func (capacityScenario) targets(_ Config, r *Report, s System, add addTarget) {
	if c := r.Capacity; c != nil {
		add("capacity (triggers/s with p95 ≤ 1 s) / L", "reported", c.FractionOfL, c.Highest > 0)
	}
	lossTarget(s, add)
}
