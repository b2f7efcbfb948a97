package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/sundialhq/sundial/loadgen"
)

// Latency summarises an HDR histogram of microseconds, in milliseconds.
type Latency struct {
	Count  int64   `json:"count"`
	P50Ms  float64 `json:"p50_ms"`
	P95Ms  float64 `json:"p95_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p99_9_ms"`
	MaxMs  float64 `json:"max_ms"`
	MeanMs float64 `json:"mean_ms"`
}

// Summarise reads the percentiles of h (µs). An empty histogram gives
// zeros and Count 0.
func Summarise(h *hdrhistogram.Histogram) Latency {
	if h == nil || h.TotalCount() == 0 {
		return Latency{}
	}
	ms := func(v int64) float64 { return float64(v) / 1000 }
	return Latency{
		Count:  h.TotalCount(),
		P50Ms:  ms(h.ValueAtQuantile(50)),
		P95Ms:  ms(h.ValueAtQuantile(95)),
		P99Ms:  ms(h.ValueAtQuantile(99)),
		P999Ms: ms(h.ValueAtQuantile(99.9)),
		MaxMs:  ms(h.Max()),
		MeanMs: h.Mean() / 1000,
	}
}

// SeriesPoint is the trigger latency of the runs due in one second.
type SeriesPoint struct {
	// Second since the start of the window.
	Second int     `json:"second"`
	Count  int     `json:"count"`
	P50Ms  float64 `json:"p50_ms"`
	P95Ms  float64 `json:"p95_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// Series groups samples by the second of their due time since from.
func Series(samples []loadgen.Sample, from time.Time) []SeriesPoint {
	if len(samples) == 0 {
		return nil
	}
	base := from.UnixMilli()
	bySec := map[int][]int64{}
	for _, s := range samples {
		sec := int(math.Floor(float64(s.DueMs-base) / 1000))
		bySec[sec] = append(bySec[sec], s.LatencyUs)
	}
	secs := make([]int, 0, len(bySec))
	for s := range bySec {
		secs = append(secs, s)
	}
	slices.Sort(secs)
	out := make([]SeriesPoint, 0, len(secs))
	for _, s := range secs {
		v := bySec[s]
		slices.Sort(v)
		q := func(p float64) float64 {
			i := int(math.Ceil(p*float64(len(v)))) - 1
			return float64(v[max(i, 0)]) / 1000
		}
		out = append(out, SeriesPoint{Second: s, Count: len(v), P50Ms: q(0.50), P95Ms: q(0.95), P99Ms: q(0.99), MaxMs: float64(v[len(v)-1]) / 1000})
	}
	return out
}

// Baselines are K, R, C and the bottleneck B derived from them.
type Baselines struct {
	K      KafkaBaseline     `json:"k_kafka"`
	R      RedisBaseline     `json:"r_redis"`
	C      CassandraBaseline `json:"c_cassandra"`
	PerRun PerRun            `json:"per_run"`
	// KSpread, RSpread and CSpread are how the BaselineSamples measurements
	// of K (records/s), R (plain calls/s) and C (writes/s) varied; K, R and
	// C are the median ones.
	KSpread Spread `json:"k_spread"`
	RSpread Spread `json:"r_spread"`
	CSpread Spread `json:"c_spread"`
	// RRunsPerSec = R plain / lease calls per run; CRunsPerSec = C / writes
	// per run.
	RRunsPerSec  float64 `json:"r_runs_per_sec"`
	CRunsPerSec  float64 `json:"c_runs_per_sec"`
	B            float64 `json:"b_runs_per_sec"`
	BottleneckOf string  `json:"bottleneck"`
	// L = min(K, R plain / 2, C / 1): see Limit.
	L       float64 `json:"l_runs_per_sec"`
	LimitOf string  `json:"limit_of"`
}

// System is what one scheduler did with the workload.
type System struct {
	Name     string          `json:"name"`
	Trigger  Latency         `json:"trigger_latency"`
	Dispatch *Latency        `json:"dispatch_latency,omitempty"`
	Counts   loadgen.Counts  `json:"counts"`
	Effects  loadgen.Effects `json:"effects"`
	// Profiles are the Go profiles of the bench process and of the
	// pipeline's subprocesses taken during the window (not in capacity
	// steps), written under profiles/ of the results folder.
	Profiles []Profile `json:"profiles,omitempty"`
	// CPU is the CPU each process of the machine's stack and pipeline used
	// during the window (not in capacity steps).
	CPU *CPUUsage `json:"cpu,omitempty"`
	// CPUPerRun is that CPU divided among the runs: what one run costs.
	CPUPerRun *CPUPerRun `json:"cpu_per_run,omitempty"`
	// Registration is the CPU and the bench process's profile while the
	// workload was registered (not in capacity steps).
	Registration *Registration `json:"registration,omitempty"`
	// DispatcherMemory is the first dispatcher's memory over the run, when
	// it ran as a subprocess.
	DispatcherMemory *ProcessMemory `json:"dispatcher_memory,omitempty"`
	// RunnerMemory is the first runner's, likewise.
	RunnerMemory *ProcessMemory `json:"runner_memory,omitempty"`
	// SustainedPerSec: runs of the window that started during the window,
	// per second of the window.
	SustainedPerSec float64 `json:"sustained_triggers_per_sec"`
	// FractionOfB = SustainedPerSec / B (herd: the drain rate / B).
	FractionOfB float64 `json:"fraction_of_b"`
	// FractionOfL = SustainedPerSec / L (herd: the drain rate / L).
	FractionOfL float64 `json:"fraction_of_l"`
	// Herd: seconds from the herd's due time until its last run started
	// (0 when some never started), and that drain as runs/s.
	HerdDrainSeconds float64 `json:"herd_drain_seconds,omitempty"`
	HerdDrainPerSec  float64 `json:"herd_drain_per_sec,omitempty"`
	// Crash: what was killed and how long until latency recovered.
	Crash []CrashEvent `json:"crash,omitempty"`
	// Dags: chaos: what became of the DAG runs due in the window.
	Dags *DagCounts `json:"dags,omitempty"`
	// Chaos: the chaos run's plan and what the supervisor saw.
	Chaos  *ChaosInfo    `json:"chaos,omitempty"`
	Series []SeriesPoint `json:"series"`
	Notes  []string      `json:"notes,omitempty"`

	// hist is the trigger histogram, for the plots.
	hist *hdrhistogram.Histogram
}

// CrashEvent is one SIGKILL and restart of a pipeline process or, in a
// chaos run, of a backend.
type CrashEvent struct {
	Process string `json:"process"`
	// Kind is "process" or "backend" (chaos).
	Kind string `json:"kind,omitempty"`
	// PlannedAt is when the chaos plan wanted the kill; KilledAt is when
	// it happened (later when the previous kill's restart ran late).
	PlannedAt time.Time `json:"planned_at,omitzero"`
	KilledAt  time.Time `json:"killed_at"`
	Restarted time.Time `json:"restarted_at"`
	// Error says why the kill or the restart did not happen as planned.
	Error string `json:"error,omitempty"`
	// RecoverySeconds: from the kill until the trigger latency of the runs
	// due in a second is back under the threshold for good (their p99), or
	// -1 if it never recovered within the window.
	RecoverySeconds float64 `json:"recovery_seconds"`
	ThresholdMs     float64 `json:"threshold_ms"`
}

// Target is one target of the project with the measured value.
type Target struct {
	Name  string  `json:"name"`
	Want  string  `json:"want"`
	Value float64 `json:"value"`
	Met   bool    `json:"met"`
}

// Report is the JSON document of one bench run.
type Report struct {
	Scenario   string          `json:"scenario"`
	StartedAt  time.Time       `json:"started_at"`
	FinishedAt time.Time       `json:"finished_at"`
	Commit     Commit          `json:"commit"`
	Machine    Machine         `json:"machine"`
	Backends   BackendVersions `json:"backends"`
	Config     Config          `json:"config"`
	Workload   WorkloadInfo    `json:"workload"`
	Baselines  Baselines       `json:"baselines"`
	Systems    []System        `json:"systems"`
	Targets    []Target        `json:"targets"`
	// Capacity is the search of a capacity run.
	Capacity *CapacityResult `json:"capacity,omitempty"`
	// Noisy describes the CPU hog of a --noisy run; empty when there was
	// none.
	Noisy string `json:"noisy,omitempty"`
	// APIWatch is what the watch client of an --api-watch run received;
	// nil when there was none.
	APIWatch *WatchStats `json:"api_watch,omitempty"`
	Notes    []string    `json:"notes,omitempty"`
}

// WorkloadInfo is the workload as planned.
type WorkloadInfo struct {
	Jobs         int       `json:"jobs"`
	IntervalJobs int       `json:"interval_jobs"`
	CronJobs     int       `json:"cron_jobs"`
	AtJobs       int       `json:"at_jobs"`
	PeriodMs     int64     `json:"interval_period_ms,omitempty"`
	PlannedRate  float64   `json:"planned_triggers_per_sec"`
	HerdAt       time.Time `json:"herd_at,omitzero"`
	WindowFrom   time.Time `json:"window_from"`
	WindowTo     time.Time `json:"window_to"`
	Target       string    `json:"target"`
	PayloadBytes int       `json:"payload_bytes"`
	// RegisterSeconds: from the first definition produced until the
	// registry had accepted them all.
	RegisterSeconds float64 `json:"register_seconds"`
}

// Write writes report.json, summary.md and the plots into dir.
func (r *Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(js, '\n'), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, "summary.md"))
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	r.Markdown(f)
	if err := f.Close(); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	for _, s := range r.Systems {
		profiles := s.Profiles
		if s.Registration != nil {
			profiles = append(slices.Clip(profiles), s.Registration.Profile)
		}
		for _, pr := range profiles {
			if pr.data == nil {
				continue
			}
			path := filepath.Join(dir, filepath.FromSlash(pr.File))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return fmt.Errorf("report: %w", err)
			}
			if err := os.WriteFile(path, pr.data, 0o644); err != nil {
				return fmt.Errorf("report: %w", err)
			}
		}
	}
	for _, pl := range r.plots() {
		if err := pl.Draw(r, filepath.Join(dir, pl.File)); err != nil {
			return err
		}
	}
	return nil
}

// plots are the report's plots: those of every report, the scenario's
// own, the capacity search's and the CPU of the window, when measured.
func (r *Report) plots() []reportPlot {
	out := []reportPlot{
		{File: "latency-over-time.png", About: "per-second trigger latency by due time", Draw: PlotOverTime},
		{File: "latency-distribution.png", About: "percentile spectrum", Draw: PlotDistribution},
	}
	out = append(out, scenarioNamed(r.Scenario).plots()...)
	if r.Capacity != nil {
		out = append(out, reportPlot{File: "capacity-p95.png", About: "the trigger p95 of each step against its rate", Draw: PlotCapacity})
	}
	// Each system's CPU is drawn to the same file; the last one measured
	// is the one kept.
	var cpu *CPUUsage
	for _, s := range r.Systems {
		if s.CPU != nil && len(s.CPU.Series) > 0 {
			cpu = s.CPU
		}
	}
	if cpu != nil {
		out = append(out, reportPlot{File: "cpu-over-time.png", About: "cores used by each process and the machine, per second of the window",
			Draw: func(r *Report, path string) error { return PlotCPU(r, cpu, path) }})
	}
	return out
}

func yes(b bool) string {
	if b {
		return "met"
	}
	return "**not met**"
}

// Markdown writes the human-readable summary.
func (r *Report) Markdown(w io.Writer) {
	p := func(format string, args ...any) { _, _ = fmt.Fprintf(w, format, args...) }
	dirty := ""
	if r.Commit.Dirty {
		dirty = " (working tree had uncommitted changes)"
	}
	p("# Bench: %s\n\n", r.Scenario)
	p("- Commit: `%s`%s\n", r.Commit.Hash, dirty)
	p("- Run: %s to %s\n", r.StartedAt.Format(time.RFC3339), r.FinishedAt.Format(time.RFC3339))
	p("- Machine: %d cores, %.1f GiB, %s, %s/%s, %s; load average %.2f at start; %s\n",
		r.Machine.Cores, float64(r.Machine.MemoryBytes)/(1<<30), r.Machine.CPU, r.Machine.OS, r.Machine.Arch, r.Machine.GoVersion, r.Machine.LoadAvg1, r.Machine.Note)
	p("- Backends (real stack, not embedded): Kafka %s at %s; Cassandra %s at %s; Redis %s at %s\n",
		r.Backends.Kafka, strings.Join(r.Backends.KafkaBrokers, ","), r.Backends.Cassandra, strings.Join(r.Backends.CassandraHosts, ","),
		r.Backends.Redis, r.Backends.RedisAddr)
	p("- Configuration: %s\n", r.Config.String())
	if r.Noisy != "" {
		p("- **Noisy neighbour**: %s\n", r.Noisy)
	}
	if r.APIWatch != nil {
		p("- **API watch**: %s\n", r.APIWatch)
	}
	wl := r.Workload
	if wl.HerdAt.IsZero() {
		p("- Workload: %d jobs (%d interval every %s, %d hourly cron, %d one-off), planned %.0f triggers/s, window %s, target %s, payload %d B; registered in %.1fs\n",
			wl.Jobs, wl.IntervalJobs, time.Duration(wl.PeriodMs)*time.Millisecond, wl.CronJobs, wl.AtJobs, wl.PlannedRate,
			wl.WindowTo.Sub(wl.WindowFrom), wl.Target, wl.PayloadBytes, wl.RegisterSeconds)
	} else {
		p("- Workload: herd of %d one-off jobs due at %s, target %s, payload %d B; registered in %.1fs\n",
			wl.Jobs, wl.HerdAt.Format(time.RFC3339Nano), wl.Target, wl.PayloadBytes, wl.RegisterSeconds)
	}
	b := r.Baselines
	p("\n## Backend baselines (same run)\n\n")
	p("| baseline | value |\n|---|---|\n")
	p("| K: franz-go produce→consume, %d B, %d partitions, %s | %.0f records/s, e2e p50 %.1f ms, p95 %.1f ms, p99 %.1f ms |\n",
		b.K.PayloadBytes, b.K.Partitions, b.K.Producer, b.K.RecordsPerSec, b.K.E2EP50Ms, b.K.E2EP95Ms, b.K.E2EP99Ms)
	p("| R: lease script EVALSHA, plain (%d callers) | %.0f calls/s |\n", b.R.Concurrency, b.R.PlainCallsPerSec)
	p("| R: lease script EVALSHA, pipelined (batches of %d) | %.0f calls/s |\n", b.R.Batch, b.R.PipelinedCallsPerSec)
	p("| C: due-entry PutDue, one row per call (%d in flight) | %.0f writes/s |\n", b.C.Concurrency, b.C.WritesPerSec)
	p("| per run: %d lease calls, %d Cassandra writes (%d reads), %d Kafka records | %s |\n",
		b.PerRun.LeaseCalls, b.PerRun.CassandraWrites, b.PerRun.CassandraReads, b.PerRun.KafkaRecords, b.PerRun.Explanation)
	if b.PerRun.CassandraWrites > 0 {
		p("| **B** = min(K, R/%d, C/%d) = min(%.0f, %.0f, %.0f) | **%.0f runs/s** (%s) |\n",
			b.PerRun.LeaseCalls, b.PerRun.CassandraWrites, b.K.RecordsPerSec, b.RRunsPerSec, b.CRunsPerSec, b.B, b.BottleneckOf)
	} else {
		p("| **B** = min(K, R/%d) = min(%.0f, %.0f), no Cassandra write a run | **%.0f runs/s** (%s) |\n",
			b.PerRun.LeaseCalls, b.K.RecordsPerSec, b.RRunsPerSec, b.B, b.BottleneckOf)
	}
	p("| **L** = min(K, R/2, C/1) = min(%.0f, %.0f, %.0f), the least backend work a run needs | **%.0f runs/s** (%s) |\n",
		b.K.RecordsPerSec, b.R.PlainCallsPerSec/2, b.C.WritesPerSec, b.L, b.LimitOf)

	p("\n## Results\n\n")
	p("| | ")
	for _, s := range r.Systems {
		p("%s | ", s.Name)
	}
	p("\n|---|")
	for range r.Systems {
		p("---|")
	}
	p("\n")
	row := func(name string, f func(s System) string) {
		p("| %s | ", name)
		for _, s := range r.Systems {
			p("%s | ", f(s))
		}
		p("\n")
	}
	ms := func(v float64) string { return fmt.Sprintf("%.1f ms", v) }
	row("trigger latency p50", func(s System) string { return ms(s.Trigger.P50Ms) })
	row("trigger latency p95", func(s System) string { return ms(s.Trigger.P95Ms) })
	row("trigger latency p99", func(s System) string { return ms(s.Trigger.P99Ms) })
	row("trigger latency p99.9", func(s System) string { return ms(s.Trigger.P999Ms) })
	row("trigger latency max", func(s System) string { return ms(s.Trigger.MaxMs) })
	row("runs measured", func(s System) string { return fmt.Sprint(s.Trigger.Count) })
	row("dispatch latency p50 / p95 / p99", func(s System) string {
		if s.Dispatch == nil {
			return "n/a"
		}
		return fmt.Sprintf("%.1f / %.1f / %.1f ms", s.Dispatch.P50Ms, s.Dispatch.P95Ms, s.Dispatch.P99Ms)
	})
	row("sustained triggers/s", func(s System) string { return fmt.Sprintf("%.0f", s.SustainedPerSec) })
	row("fraction of B", func(s System) string { return fmt.Sprintf("%.0f%%", 100*s.FractionOfB) })
	row("fraction of L", func(s System) string { return fmt.Sprintf("%.0f%%", 100*s.FractionOfL) })
	row("CPU per run: machine (Sundial / backends / bench)", func(s System) string {
		if s.CPUPerRun == nil || s.CPUPerRun.RunsPerSec == 0 {
			return "n/a"
		}
		c := s.CPUPerRun
		return fmt.Sprintf("%.2f ms (%.2f / %.2f / %.2f)", c.MachineMs, c.SundialMs, c.BackendsMs, c.BenchMs)
	})
	row("expected runs in window", func(s System) string { return fmt.Sprint(s.Counts.Expected) })
	row("lost (of which dispatched, not started)", func(s System) string {
		return fmt.Sprintf("%d (%d)", s.Counts.Lost, s.Counts.LostDispatched)
	})
	row("duplicate executions", func(s System) string { return fmt.Sprint(s.Counts.DuplicateExecutions) })
	row("duplicate effects (of which within one attempt)", func(s System) string {
		return fmt.Sprintf("%d (%d)", s.Effects.DuplicateEffects, s.Effects.DuplicateSameAttempt)
	})
	row("redeliveries answered as replays (keys)", func(s System) string {
		return fmt.Sprintf("%d (%d)", s.Effects.Redeliveries, s.Effects.RedeliveredKeys)
	})
	row("stale fencing tokens at the downstream", func(s System) string { return fmt.Sprint(s.Effects.StaleFencing) })
	row("unexpected runs / early starts", func(s System) string {
		return fmt.Sprintf("%d / %d", s.Counts.Unexpected, s.Counts.EarlyStarts)
	})
	row("duplicate dispatches", func(s System) string { return fmt.Sprint(s.Counts.DuplicateDispatches) })
	if !wl.HerdAt.IsZero() {
		row("herd drained in", func(s System) string {
			if s.HerdDrainSeconds == 0 {
				return "not drained"
			}
			return fmt.Sprintf("%.2f s (%.0f runs/s)", s.HerdDrainSeconds, s.HerdDrainPerSec)
		})
	}
	for _, s := range r.Systems {
		if s.Dags != nil {
			p("\n- %s: DAG runs due in the window (%d DAGs of %d nodes every %s): %s", s.Name, s.Dags.DAGs, s.Dags.Nodes,
				time.Duration(s.Dags.EveryMs)*time.Millisecond, s.Dags)
			for _, e := range s.Dags.Examples {
				p("\n  - %s", e)
			}
		}
		if s.Chaos != nil {
			continue // the kills are a table of their own
		}
		for _, c := range s.Crash {
			rec := "did not recover in the window"
			if c.RecoverySeconds >= 0 {
				rec = fmt.Sprintf("recovered %.1f s after the kill", c.RecoverySeconds)
			}
			p("\n- %s: %s killed (SIGKILL) at %s, restarted at %s; %s (per-second p99 of the runs due after the kill back under %.0f ms)",
				s.Name, c.Process, c.KilledAt.Format("15:04:05.000"), c.Restarted.Format("15:04:05.000"), rec, c.ThresholdMs)
		}
		for _, n := range s.Notes {
			p("\n- %s: %s", s.Name, n)
		}
	}
	p("\n")
	for _, s := range r.Systems {
		if s.Chaos != nil {
			chaosMarkdown(p, s, r.Workload.WindowFrom, r.Workload.WindowTo)
		}
	}
	if r.Capacity != nil {
		capacityMarkdown(p, r.Capacity, r.Baselines)
	}
	for _, s := range r.Systems {
		if s.CPU != nil {
			cpuMarkdown(p, s.Name, s.CPU)
		}
		if len(s.Profiles) > 0 {
			profilesMarkdown(p, s.Name, s.Profiles)
		}
		if s.Registration != nil {
			registrationMarkdown(p, s.Name, s.Registration)
		}
		if s.DispatcherMemory != nil {
			memoryMarkdown(p, "Dispatcher", s.Name, s.DispatcherMemory)
		}
		if s.RunnerMemory != nil {
			memoryMarkdown(p, "Runner", s.Name, s.RunnerMemory)
		}
	}
	if len(r.Targets) > 0 {
		p("\n## Targets\n\n| target | want | measured | |\n|---|---|---|---|\n")
		for _, t := range r.Targets {
			p("| %s | %s | %.2f | %s |\n", t.Name, t.Want, t.Value, yes(t.Met))
		}
	}
	if len(r.Notes) > 0 {
		p("\n## Notes\n\n")
		for _, n := range r.Notes {
			p("- %s\n", n)
		}
	}
	sep := "\nPlots: "
	for _, pl := range r.plots() {
		p("%s`%s` (%s)", sep, pl.File, pl.About)
		sep = ", "
	}
	p(".\n")
}

// memoryMarkdown writes the memory section of a process (role: "Dispatcher",
// "Runner").
func memoryMarkdown(p func(string, ...any), role, system string, m *ProcessMemory) {
	p("\n## %s memory (%s, %s, /proc VmRSS every %.0fs)\n\n", role, system, m.Process, m.SampleEverySeconds)
	p("| when | jobs stored | RSS | peak so far (VmHWM) |\n|---|---|---|---|\n")
	for _, ms := range m.Milestones {
		p("| first sample with %d jobs stored (%s) | %d | %.1f MiB | %.1f MiB |\n",
			ms.Stored, ms.Sample.At.Format("15:04:05"), ms.Sample.Stored, ms.Sample.RSSMiB, ms.Sample.HWMMiB)
	}
	if m.WindowMaxRSSMiB > 0 {
		p("| measured window, every job stored and firing: max / last | | %.1f / %.1f MiB | |\n", m.WindowMaxRSSMiB, m.WindowLastRSSMiB)
	}
	p("| whole run | | | %.1f MiB |\n", m.PeakHWMMiB)
	if len(m.Milestones) == 2 && m.Milestones[0].Sample.RSSMiB > 0 {
		first, last := m.Milestones[0], m.Milestones[1]
		p("\nRSS with %d jobs stored is %.2f × the RSS with %d stored", last.Stored, last.Sample.RSSMiB/first.Sample.RSSMiB, first.Stored)
		if m.WindowMaxRSSMiB > 0 {
			p("; the window's largest is %.2f ×", m.WindowMaxRSSMiB/first.Sample.RSSMiB)
		}
		p(".\n")
	}
	if m.Errors > 0 {
		p("\n%d samples failed (the process was not running).\n", m.Errors)
	}
}

// capacityMarkdown writes the capacity search's steps and result.
func capacityMarkdown(p func(string, ...any), c *CapacityResult, bl Baselines) {
	p("\n## Capacity search\n\n")
	p("Each step: %.0f s window of interval jobs every %s (rate × %.0f jobs), %.0f s drain; a step passes when it lost nothing and its trigger p95 is ≤ %s.\n\n",
		c.StepSeconds, CapacityPeriod, CapacityPeriod.Seconds(), c.DrainSeconds, CapacityP95)
	p("| step | offered triggers/s | jobs | trigger p95 | p99 | sustained triggers/s | lost / expected | |\n|---|---|---|---|---|---|---|---|\n")
	for i, st := range c.Steps {
		verdict := "fails"
		if st.Pass {
			verdict = "passes"
		}
		p("| %d | %.0f | %d | %.1f ms | %.1f ms | %.0f | %d / %d | %s |\n", i+1, st.Rate, st.Jobs, st.Trigger.P95Ms, st.Trigger.P99Ms,
			st.SustainedPerSec, st.Lost, st.Expected, verdict)
	}
	if c.Highest == 0 {
		p("\n**No step passed** (%s).\n", c.Stopped)
		return
	}
	p("\n**Capacity: %.0f triggers/s** with p95 ≤ %s = **%.0f%% of L** (%.0f runs/s), %.0f%% of B (%.0f runs/s)", c.Highest, CapacityP95,
		100*c.FractionOfL, bl.L, 100*c.FractionOfB, bl.B)
	if c.LowestFailing > 0 {
		p("; %.0f triggers/s failed", c.LowestFailing)
	}
	p(". The search stopped: %s.\n", c.Stopped)
}
