package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
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
	// Work is the backend work of one run of the window by component,
	// counted by the clients' hooks (requests sent, records produced),
	// with the sum as component "all".
	Work []ComponentWork `json:"work,omitempty"`
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
	// HerdPeakStartsPerSec: a herd's most runs started in one second,
	// which a splay (WorkloadInfo.SplayMs) lowers.
	HerdPeakStartsPerSec int `json:"herd_peak_starts_per_sec,omitempty"`
	// Crash: what was killed and how long until latency recovered.
	Crash []CrashEvent `json:"crash,omitempty"`
	// Dags: chaos: what became of the DAG runs due in the window.
	Dags *DagCounts `json:"dags,omitempty"`
	// Chaos: the chaos run's plan and what the supervisor saw.
	Chaos  *ChaosInfo    `json:"chaos,omitempty"`
	Series []SeriesPoint `json:"series"`
	// StartsPerSec: the window's runs started in each second since the
	// window's start (by start time, the drain included): the throughput,
	// where Series is by due time.
	StartsPerSec []int    `json:"starts_per_sec,omitempty"`
	Notes        []string `json:"notes,omitempty"`

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
	// due in a second is back under the threshold for good (their p99), up
	// to a threshold before the next kill, or -1 if it never recovered
	// within that span.
	RecoverySeconds float64 `json:"recovery_seconds"`
	// SettledSeconds: from the kill until the first of settleSeconds
	// seconds in a row whose p99 is under the threshold (a later second
	// over it, unrelated to the kill, does not undo it), or -1 if none
	// came before the next kill or the end of the series; nil in reports
	// written before it. Shown beside RecoverySeconds, which it never
	// exceeds.
	SettledSeconds *float64 `json:"settled_seconds,omitempty"`
	ThresholdMs    float64  `json:"threshold_ms"`
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
	// SplayMs: the herd's splay window (a herd of yearly crons then).
	SplayMs      int64     `json:"splay_ms,omitempty"`
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
	if err := r.writeMarkdown(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("report: %w", err)
	}
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

// memoryView is the memory section of a process.
type memoryView struct {
	// Role is "Dispatcher" or "Runner"; System the system measured.
	Role, System string
	*ProcessMemory
	// Growth compares the RSS of the last milestone with the first's; nil
	// without two milestones.
	Growth *memoryGrowth
}

// memoryGrowth is how the RSS grew from the first milestone to the last
// and to the window's largest.
type memoryGrowth struct {
	First, Last RSSMilestone
	// Ratio: the last milestone's RSS over the first's; WindowRatio: the
	// window's largest over the first's (0 when the window was not
	// sampled).
	Ratio, WindowRatio float64
}

// memorySummary builds the memory section of a process (role:
// "Dispatcher", "Runner").
func memorySummary(role, system string, m *ProcessMemory) *memoryView {
	v := &memoryView{Role: role, System: system, ProcessMemory: m}
	if len(m.Milestones) == 2 && m.Milestones[0].Sample.RSSMiB > 0 {
		first, last := m.Milestones[0], m.Milestones[1]
		v.Growth = &memoryGrowth{First: first, Last: last, Ratio: last.Sample.RSSMiB / first.Sample.RSSMiB}
		if m.WindowMaxRSSMiB > 0 {
			v.Growth.WindowRatio = m.WindowMaxRSSMiB / first.Sample.RSSMiB
		}
	}
	return v
}

// capacityView is the capacity search's section.
type capacityView struct {
	*CapacityResult
	// Period and P95: CapacityPeriod and CapacityP95.
	Period, P95 time.Duration
	Rows        []capacityStepRow
	// L and B are the baselines' L and B.
	L, B float64
}

// capacityStepRow is one step of the capacity search, numbered from 1.
type capacityStepRow struct {
	N int
	CapacityStep
}

// capacitySummary builds the capacity search's section.
func capacitySummary(c *CapacityResult, bl Baselines) *capacityView {
	v := &capacityView{CapacityResult: c, Period: CapacityPeriod, P95: CapacityP95, L: bl.L, B: bl.B}
	for i, st := range c.Steps {
		v.Rows = append(v.Rows, capacityStepRow{N: i + 1, CapacityStep: st})
	}
	return v
}
