package bench

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var updateGolden = flag.Bool("update", false, "rewrite the summaries of testdata/*.md from the code")

// goldenReports are reports of every scenario with every section of the
// summary filled: each one's summary is kept in testdata/summary-<name>.md.
func goldenReports(t *testing.T) map[string]*Report {
	return map[string]*Report{
		"steady":        goldenSteady(),
		"herd":          goldenHerd(),
		"crash":         goldenCrash(),
		"chaos":         goldenChaos(),
		"capacity":      goldenCapacity(t, 3000),
		"capacity-none": goldenCapacityNone(),
		"peer":          sampleReport(),
		"workers":       goldenWorkers(),
	}
}

// TestSummaryGolden: the summary of each golden report is the one kept in
// testdata (go test -run TestSummaryGolden ./bench/ -update rewrites them).
func TestSummaryGolden(t *testing.T) {
	t.Parallel()
	for name, r := range goldenReports(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			r.Markdown(&buf)
			path := filepath.Join("testdata", "summary-"+name+".md")
			if *updateGolden {
				require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, string(want), buf.String())
		})
	}
}

func goldenCPU(cores int) *CPUUsage {
	return &CPUUsage{SampleEverySeconds: 1, Cores: cores, MachineBusyMean: 0.93, MachineBusyMax: 1, OtherCoresMean: 0.04,
		Processes: []ProcessCPU{
			{Name: "kafka", Role: "backend", PIDs: []int{101}, MeanCores: 0.39, MaxCores: 0.61, Intervals: 59},
			{Name: "cassandra", Role: "backend", PIDs: []int{102}, MeanCores: 0.61, MaxCores: 0.9, Intervals: 59},
			{Name: "redis", Role: "backend", Note: "not found: no pid file and no listener on 127.0.0.1:6379"},
			{Name: "bench", Role: "pipeline", PIDs: []int{200}, MeanCores: 0.44, MaxCores: 0.52, Intervals: 59},
			{Name: "dispatcher-0", Role: "pipeline", PIDs: []int{301, 302}, MeanCores: 0.27, MaxCores: 0.8, Intervals: 57, Note: "restarted"},
		},
		Series: []CPUPoint{{Second: 1, Cores: []float64{0.3, 0.6, -1, 0.4, 0.2}, MachineBusyCores: 1.8}, {Second: 2, Cores: []float64{0.4, 0.6, -1, 0.5, 0.3}, MachineBusyCores: 1.9}},
	}
}

func goldenSteady() *Report {
	r := sampleReport()
	r.Scenario = "steady"
	r.Config = Config{Scenario: "steady", Pipeline: "in-process: test"}
	r.Noisy = "a hog of 1 core (pid 4242)"
	r.APIWatch = &WatchStats{Messages: 12345, InWindow: 12000, InWindowPerSec: 200, Reopened: 1, LastError: "unavailable"}
	r.Workload.RegisterSeconds = 41.25
	r.Baselines.L, r.Baselines.LimitOf = 9000, "C (Cassandra writes)"
	r.Baselines.KSpread = Spread{Samples: []float64{98000, 100000, 104000}, Relative: 0.06}
	r.Baselines.RSpread = Spread{Samples: []float64{20000, 19000, 21000}, Relative: 0.1, Warmup: []float64{19000, 20000}, Settled: true}
	r.Baselines.CSpread = Spread{Samples: []float64{9000, 8100, 9900}, Relative: 0.2,
		Warmup: []float64{1300, 2000, 2400, 2600, 3300, 4900, 6000, 7500}}
	s := r.Systems[0]
	s.FractionOfL = 2100.0 / 9000
	s.Dispatch = &Latency{P50Ms: 1.25, P95Ms: 3.5, P99Ms: 7}
	s.CPU = goldenCPU(2)
	pr := cpuPerRun(*s.CPU, s.SustainedPerSec)
	s.CPUPerRun = &pr
	top := []ProfileFunc{
		{Function: "runtime.main", FlatSeconds: 0, CumSeconds: 9.5, CumShare: 0.95},
		{Function: "github.com/sundialhq/sundial/dispatcher.(*Core).Step", FlatSeconds: 1.25, CumSeconds: 4, CumShare: 0.4},
	}
	s.Profiles = []Profile{
		{Process: "bench", Kind: "cpu", File: "profiles/bench.cpu.pprof", From: from.Add(15 * time.Second), To: from.Add(45 * time.Second), CPUSeconds: 10, Top: top},
		{Process: "bench", Kind: "heap", File: "profiles/bench.heap.pprof", To: from.Add(time.Minute)},
		{Process: "dispatcher-0", Kind: "cpu", File: "profiles/dispatcher-0.cpu.pprof", From: from.Add(15 * time.Second), To: from.Add(45 * time.Second), CPUSeconds: 3, Error: "not a CPU profile: no cpu/nanoseconds sample type"},
		{Process: "dispatcher-0", Kind: "heap", Error: "dispatcher-0 is not running"},
	}
	s.Registration = &Registration{From: from.Add(-2 * time.Minute), To: from.Add(-80 * time.Second), Definitions: 1000, CPU: goldenCPU(2),
		Profile: Profile{Process: "bench", Kind: "cpu", File: "profiles/bench.registration.cpu.pprof", From: from.Add(-2 * time.Minute), To: from.Add(-80 * time.Second), CPUSeconds: 30, Top: top[:1]}}
	// Two milestones (10,000 and every job stored) give the ratio of
	// their RSS.
	s.RunnerMemory = summariseMemory("runner-0", 2*time.Second, []RSSSample{
		{At: from.Add(-time.Minute), Stored: 10_000, RSSMiB: 20, HWMMiB: 20},
		{At: from.Add(-40 * time.Second), Stored: 20_000, RSSMiB: 25, HWMMiB: 26},
		{At: from.Add(time.Second), Stored: 20_000, RSSMiB: 27, HWMMiB: 28},
	}, 3, memoryMarks(20_000), from, from.Add(time.Minute))
	s.Notes = []string{"the runner's lag stayed under 10 records"}
	r.Systems = []System{s}
	r.Notes = []string{"a note of the run", "another one"}
	r.Targets = targets(r.Config, r)
	return r
}

func goldenHerd() *Report {
	r := sampleReport()
	r.Scenario = "herd"
	r.Config = Config{Scenario: "herd", Pipeline: "in-process: test"}
	r.Workload = WorkloadInfo{Jobs: 1000, AtJobs: 1000, HerdAt: from.Add(1500 * time.Millisecond), WindowFrom: from, WindowTo: from.Add(time.Minute), Target: "http", PayloadBytes: 256, RegisterSeconds: 3}
	r.Baselines.PerRun = PerRun{LeaseCalls: 2, KafkaRecords: 3, Explanation: "no Cassandra write"}
	r.Baselines.B, r.Baselines.BottleneckOf = 10000, "R (Redis leases, plain)"
	r.Systems[0].HerdDrainSeconds, r.Systems[0].HerdDrainPerSec = 12.5, 8000
	r.Systems[1].HerdDrainSeconds = 0
	// A registration whose profile could not be taken.
	r.Systems[0].Registration = &Registration{From: from.Add(-10 * time.Second), To: from.Add(-7 * time.Second), Definitions: 1000, CPU: goldenCPU(4),
		Profile: Profile{Process: "bench", Kind: "cpu", Error: "start the CPU profile: cpu profiling already in use"}}
	r.Targets = targets(r.Config, r)
	return r
}

func goldenCrash() *Report {
	r := sampleReport()
	r.Scenario = "crash"
	r.Config = Config{Scenario: "crash"}.WithDefaults()
	s := r.Systems[0]
	s.Crash = []CrashEvent{
		{Process: "runner-0", KilledAt: from.Add(20*time.Second + 250*time.Millisecond), Restarted: from.Add(25 * time.Second), RecoverySeconds: 4.5, SettledSeconds: new(3.0), ThresholdMs: 250},
		{Process: "dispatcher-0", KilledAt: from.Add(40 * time.Second), Restarted: from.Add(45 * time.Second), RecoverySeconds: -1, ThresholdMs: 900},
	}
	s.Notes = []string{"one note"}
	r.Systems = []System{s}
	r.Targets = targets(r.Config, r)
	return r
}

func goldenChaos() *Report {
	r := chaosReport()
	s := &r.Systems[0]
	s.Dags.Lost, s.Dags.Examples = 1, []string{"dag-3 due 12:00:10: RUNNING", "dag-7 due 12:00:50: missing"}
	s.Notes = []string{"a chaos note"}
	r.Targets = targets(r.Config, r)
	return r
}

func goldenCapacity(t *testing.T, capacity float64) *Report {
	pipe := fakePipeline{capacity: capacity}
	res, err := CapacitySearch{Start: 250, Max: 20000}.Run(context.Background(), pipe.measure)
	require.NoError(t, err)
	r := sampleReport()
	r.Scenario = "capacity"
	r.Config = Config{Scenario: "capacity", Pipeline: "in-process: test"}
	r.Systems = r.Systems[:1]
	r.Baselines.L = 6000
	res.FractionOfL, res.FractionOfB = res.Highest/r.Baselines.L, res.Highest/r.Baselines.B
	res.StepSeconds, res.DrainSeconds = 30, 15
	r.Capacity = &res
	r.Targets = targets(r.Config, r)
	return r
}

// goldenCapacityNone is a capacity search in which no step passed.
func goldenCapacityNone() *Report {
	r := sampleReport()
	r.Scenario = "capacity"
	r.Config = Config{Scenario: "capacity", Pipeline: "in-process: test"}
	r.Systems = r.Systems[:1]
	r.Capacity = &CapacityResult{StepSeconds: 30, DrainSeconds: 15, LowestFailing: 125, Stopped: "no rate down to 125/s passed",
		Steps: []CapacityStep{
			{Rate: 250, Jobs: 1250, Expected: 7500, Lost: 2, Trigger: Latency{P95Ms: 80, P99Ms: 95.5}, SustainedPerSec: 249.9},
			{Rate: 125, Jobs: 625, Expected: 3750, Trigger: Latency{P95Ms: 1500, P99Ms: 2000}, SustainedPerSec: 120},
		}}
	r.Targets = targets(r.Config, r)
	return r
}

// TestChaosRecoveryVerdict: the recovery column of a chaos run's kills, for a
// window ending at to.
func TestChaosRecoveryVerdict(t *testing.T) {
	t.Parallel()
	to := from.Add(2 * time.Minute)
	at := from.Add(time.Minute)
	for _, tc := range []struct {
		name string
		e    CrashEvent
		want string
	}{
		{"kill that did not happen", CrashEvent{KilledAt: at, Error: "not running", RecoverySeconds: 3}, "-"},
		{"kill after the window", CrashEvent{KilledAt: to, RecoverySeconds: 3}, "after the window: not measured"},
		{"slow until the window's last second", CrashEvent{KilledAt: at, RecoverySeconds: 59.5}, "≥ 59.5 s (slow until the end of the window)"},
		{"recovered", CrashEvent{KilledAt: at, RecoverySeconds: 3}, "3.0 s"},
		{"recovered at once", CrashEvent{KilledAt: at}, "0.0 s"},
		{"not recovered", CrashEvent{KilledAt: at, RecoverySeconds: -1}, "not recovered before the next kill"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, chaosRecovery(tc.e, to))
		})
	}
	require.Equal(t, "did not recover in the window", crashRecovery(CrashEvent{RecoverySeconds: -1}))
	require.Equal(t, "recovered 4.5 s after the kill", crashRecovery(CrashEvent{RecoverySeconds: 4.5}))
}
