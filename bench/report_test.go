package bench

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/loadgen"
)

var from = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func histOf(ms ...float64) *hdrhistogram.Histogram {
	h := hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)
	for _, v := range ms {
		_ = h.RecordValue(int64(v * 1000))
	}
	return h
}

func TestSummarise(t *testing.T) {
	t.Parallel()
	var ms []float64
	for i := 1; i <= 1000; i++ {
		ms = append(ms, float64(i))
	}
	l := Summarise(histOf(ms...))
	assert.Equal(t, int64(1000), l.Count)
	assert.InDelta(t, 500, l.P50Ms, 1)
	assert.InDelta(t, 950, l.P95Ms, 1)
	assert.InDelta(t, 990, l.P99Ms, 1)
	assert.InDelta(t, 999, l.P999Ms, 1)
	assert.InDelta(t, 1000, l.MaxMs, 1)
	assert.InDelta(t, 500.5, l.MeanMs, 1)
	assert.Equal(t, Latency{}, Summarise(histOf()))
}

func TestSeries(t *testing.T) {
	t.Parallel()
	var samples []loadgen.Sample
	// Second 0: 1..100 ms; second 2: one run of 7 ms; one run before the
	// window (second -1).
	for i := 1; i <= 100; i++ {
		samples = append(samples, loadgen.Sample{DueMs: from.UnixMilli() + int64(i), LatencyUs: int64(i) * 1000})
	}
	samples = append(samples, loadgen.Sample{DueMs: from.UnixMilli() + 2500, LatencyUs: 7000},
		loadgen.Sample{DueMs: from.UnixMilli() - 1, LatencyUs: 3000})
	got := Series(samples, from)
	require.Len(t, got, 3)
	assert.Equal(t, SeriesPoint{Second: -1, Count: 1, P50Ms: 3, P95Ms: 3, P99Ms: 3, MaxMs: 3}, got[0])
	assert.Equal(t, SeriesPoint{Second: 0, Count: 100, P50Ms: 50, P95Ms: 95, P99Ms: 99, MaxMs: 100}, got[1])
	assert.Equal(t, SeriesPoint{Second: 2, Count: 1, P50Ms: 7, P95Ms: 7, P99Ms: 7, MaxMs: 7}, got[2])
	assert.Nil(t, Series(nil, from))
}

func TestRecovery(t *testing.T) {
	t.Parallel()
	// p99 of 20 ms well before the kill at second 20.3; seconds 18-19 are
	// slow (runs queued on the killed process), as are 20-23; 24 on are
	// fine again; a second kill at 40 with slow seconds to the end.
	var series []SeriesPoint
	for s := range 50 {
		p99 := 20.0
		if (s >= 18 && s <= 23) || s >= 40 {
			p99 = 2000
		}
		series = append(series, SeriesPoint{Second: s, Count: 10, P99Ms: p99})
	}
	crashes := []CrashEvent{
		{Process: "runner-0", KilledAt: from.Add(20*time.Second + 300*time.Millisecond)},
		{Process: "dispatcher-0", KilledAt: from.Add(40 * time.Second)},
	}
	th, rec := recovery(series, from, crashes, 0)
	assert.Equal(t, 250.0, th, "the threshold is at least 250 ms")
	assert.InDelta(t, 3.7, rec, 0.001, "back under the threshold from second 24")
	_, rec = recovery(series, from, crashes, 1)
	assert.InDelta(t, 10, rec, 0.001, "slow until the end of the series")

	quiet := []SeriesPoint{{Second: 0, P99Ms: 400}, {Second: 1, P99Ms: 500}, {Second: 2, P99Ms: 450}, {Second: 15, P99Ms: 10}}
	th, rec = recovery(quiet, from, []CrashEvent{{KilledAt: from.Add(13 * time.Second)}}, 0)
	assert.Equal(t, 900.0, th, "twice the median p99 of the seconds ending 10s before the kill")
	assert.Zero(t, rec)
}

func TestBottleneck(t *testing.T) {
	t.Parallel()
	per := PerRun{LeaseCalls: 2, CassandraWrites: 3}
	b, which := Bottleneck(KafkaBaseline{RecordsPerSec: 50000}, RedisBaseline{PlainCallsPerSec: 12000}, CassandraBaseline{WritesPerSec: 15000}, per)
	assert.InDelta(t, 5000, b, 0.001)
	assert.Equal(t, "C (Cassandra writes)", which)
	b, which = Bottleneck(KafkaBaseline{RecordsPerSec: 50000}, RedisBaseline{PlainCallsPerSec: 6000}, CassandraBaseline{WritesPerSec: 15000}, per)
	assert.InDelta(t, 3000, b, 0.001)
	assert.Equal(t, "R (Redis leases, plain)", which)
	b, which = Bottleneck(KafkaBaseline{RecordsPerSec: 1000}, RedisBaseline{PlainCallsPerSec: 6000}, CassandraBaseline{WritesPerSec: 15000}, per)
	assert.InDelta(t, 1000, b, 0.001)
	assert.Equal(t, "K (Kafka)", which)
}

func sampleReport() *Report {
	sys := System{
		Name: "sundial", Trigger: Summarise(histOf(5, 10, 20, 300)), Counts: loadgen.Counts{Expected: 4, StartedInWindow: 4},
		Effects: loadgen.Effects{Requests: 7, Keys: 4, DuplicateEffects: 1, Redeliveries: 2, RedeliveredKeys: 1}, SustainedPerSec: 2100, FractionOfB: 0.7,
		Series: []SeriesPoint{{Second: 0, Count: 2, P50Ms: 5, P95Ms: 10, P99Ms: 10, MaxMs: 10}, {Second: 1, Count: 2, P50Ms: 20, P95Ms: 300, P99Ms: 300, MaxMs: 300}},
		hist:   histOf(5, 10, 20, 300),
	}
	peer := sys
	sys.DispatcherMemory = summariseMemory("dispatcher-0", 2*time.Second, []RSSSample{
		{At: from.Add(-time.Minute), Stored: 500, RSSMiB: 30, HWMMiB: 30},
		{At: from.Add(-50 * time.Second), Stored: 1000, RSSMiB: 40, HWMMiB: 41},
		{At: from.Add(time.Second), Stored: 1000, RSSMiB: 44, HWMMiB: 50},
	}, 0, memoryMarks(1000), from, from.Add(time.Minute))
	peer.Name = "asynq"
	peer.Trigger = Summarise(histOf(2500, 4000))
	peer.hist = histOf(2500, 4000)
	r := &Report{
		Scenario: "peer", StartedAt: from, FinishedAt: from.Add(time.Minute), Commit: Commit{Hash: "abc123", Dirty: true},
		Machine:  Machine{Cores: 2, MemoryBytes: 24 << 30, CPU: "test cpu"},
		Backends: BackendVersions{Kafka: "v4.3", Cassandra: "5.0.9", Redis: "7.0.15", KafkaBrokers: []string{"127.0.0.1:19092"}},
		Config:   Config{Scenario: "peer", Pipeline: "in-process: test"},
		Workload: WorkloadInfo{Jobs: 1000, IntervalJobs: 900, CronJobs: 100, PeriodMs: 1000, PlannedRate: 1000, WindowFrom: from, WindowTo: from.Add(time.Minute)},
		Baselines: Baselines{K: KafkaBaseline{RecordsPerSec: 100000}, R: RedisBaseline{PlainCallsPerSec: 20000}, C: CassandraBaseline{WritesPerSec: 9000},
			PerRun: PerRun{LeaseCalls: 2, CassandraWrites: 3}, RRunsPerSec: 10000, CRunsPerSec: 3000, B: 3000, BottleneckOf: "C (Cassandra writes)"},
		Systems: []System{sys, peer},
	}
	r.Targets = targets(r.Config, r)
	return r
}

func TestReportWrite(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "20260301-120000-peer")
	r := sampleReport()
	require.NoError(t, r.Write(dir))

	var back Report
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, "abc123", back.Commit.Hash)
	assert.Equal(t, 2, back.Machine.Cores)
	assert.Equal(t, "5.0.9", back.Backends.Cassandra)
	assert.False(t, back.Backends.Embedded)
	require.Len(t, back.Systems, 2)
	assert.Equal(t, r.Systems[0].Trigger, back.Systems[0].Trigger)
	assert.Equal(t, int64(1), back.Systems[0].Effects.DuplicateEffects)
	assert.InDelta(t, 3000, back.Baselines.B, 0.001)
	for _, key := range []string{`"p99_9_ms"`, `"lost"`, `"duplicate_executions"`, `"duplicate_effects"`, `"fraction_of_b"`, `"commit"`, `"machine"`} {
		assert.Contains(t, string(b), key)
	}

	md, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	require.NoError(t, err)
	s := string(md)
	for _, want := range []string{"abc123", "uncommitted changes", "Kafka v4.3", "Cassandra 5.0.9", "Redis 7.0.15", "2 cores",
		"**3000 runs/s** (C (Cassandra writes))", "| sundial | asynq |", "| duplicate effects (of which within one attempt) | 1 (0) | 1 (0) |", "in-process: test",
		"| redeliveries answered as replays (keys) | 2 (1) | 2 (1) |",
		"## Dispatcher memory (sundial, dispatcher-0, /proc VmRSS every 2s)",
		"| first sample with 1000 jobs stored (", "| 1000 | 40.0 MiB | 41.0 MiB |", "max / last | | 44.0 / 44.0 MiB |", "| whole run | | | 50.0 MiB |"} {
		assert.Contains(t, s, want)
	}
	assert.Contains(t, s, "sundial p95 / asynq p95")

	for _, name := range []string{"latency-over-time.png", "latency-distribution.png"} {
		f, err := os.Open(filepath.Join(dir, name))
		require.NoError(t, err)
		img, err := png.Decode(f)
		f.Close()
		require.NoError(t, err, name)
		assert.Greater(t, img.Bounds().Dx(), 100, name)
	}
}

func TestTargets(t *testing.T) {
	t.Parallel()
	r := sampleReport()
	got := map[string]Target{}
	for _, tg := range r.Targets {
		got[tg.Name] = tg
	}
	p95 := got["trigger p95 (ms)"]
	assert.False(t, p95.Met, "p95 of 300 ms misses 100 ms")
	ratio := got["sundial p95 / asynq p95"]
	assert.InDelta(t, r.Systems[0].Trigger.P95Ms/r.Systems[1].Trigger.P95Ms, ratio.Value, 1e-9)
	assert.True(t, ratio.Met)
	loss := got["lost + duplicate executions + duplicate effects"]
	assert.False(t, loss.Met, "one duplicate effect fails the target")
	assert.Equal(t, 1.0, loss.Value)

	herd := &Report{Workload: WorkloadInfo{Jobs: 100000}, Baselines: Baselines{B: 5000},
		Systems: []System{{HerdDrainSeconds: 24}}}
	tg := targets(Config{Scenario: "herd"}, herd)
	require.NotEmpty(t, tg)
	assert.True(t, tg[0].Met, "24 s is within 1.25 × 100000 / 5000 = 25 s")
	assert.True(t, strings.Contains(tg[0].Want, "25.0"))
	assert.Equal(t, "herd drain rate / L", tg[1].Name)
	assert.False(t, tg[1].Met, "no fraction of L set: 0 misses 0.50")
	herd.Systems[0].FractionOfL = 0.6
	assert.True(t, targets(Config{Scenario: "herd"}, herd)[1].Met)
	herd.Systems[0].HerdDrainSeconds = 0
	assert.False(t, targets(Config{Scenario: "herd"}, herd)[0].Met, "a herd that never drained misses")
	assert.False(t, targets(Config{Scenario: "herd"}, herd)[1].Met, "nor does its drain rate count")
}

// TestSteadyTargets: a steady run keeps up when it starts what its
// workload offered (the planned rate less the grid's rounding), and at a
// million jobs the dispatcher and the runner each stay within 256 MiB of
// RSS over the whole run.
func TestSteadyTargets(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 27, 15, 0, 0, 0, time.UTC)
	mem := func(peak float64) *ProcessMemory { return &ProcessMemory{PeakHWMMiB: peak} }
	r := &Report{Workload: WorkloadInfo{Jobs: 1_000_000, WindowFrom: t0, WindowTo: t0.Add(3 * time.Minute)},
		Systems: []System{{SustainedPerSec: 1999.3, Counts: loadgen.Counts{Expected: 359930},
			DispatcherMemory: mem(234.5), RunnerMemory: mem(300)}}}
	got := func() map[string]Target {
		m := map[string]Target{}
		for _, tg := range targets(Config{Scenario: "steady"}, r) {
			m[tg.Name] = tg
		}
		return m
	}
	g := got()
	assert.True(t, g["sustained triggers/s"].Met, "1,999.3 of 1,999.6 offered keeps up")
	assert.Contains(t, g["sustained triggers/s"].Want, "2000/s offered")
	assert.True(t, g["dispatcher RSS over the whole run (MiB)"].Met)
	assert.False(t, g["runner RSS over the whole run (MiB)"].Met, "300 MiB is over 256")

	r.Systems[0].SustainedPerSec = 1900
	r.Systems[0].RunnerMemory = nil
	g = got()
	assert.False(t, g["sustained triggers/s"].Met, "1,900 of 2,000 offered falls behind")
	assert.NotContains(t, g, "runner RSS over the whole run (MiB)", "a runner in the bench process is not sampled")

	r.Workload.Jobs = 100_000
	assert.NotContains(t, got(), "dispatcher RSS over the whole run (MiB)", "the bound is for a million jobs")
}

func TestMarkdownHerd(t *testing.T) {
	t.Parallel()
	r := sampleReport()
	r.Scenario = "herd"
	r.Workload.HerdAt = from
	r.Systems = r.Systems[:1]
	r.Systems[0].HerdDrainSeconds, r.Systems[0].HerdDrainPerSec = 12.5, 8000
	var buf bytes.Buffer
	r.Markdown(&buf)
	assert.Contains(t, buf.String(), "herd of 1000 one-off jobs")
	assert.Contains(t, buf.String(), "12.50 s (8000 runs/s)")
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, Config{Scenario: "steady"}.Validate())
	require.NoError(t, Config{Scenario: "crash"}.Validate())
	err := Config{Scenario: "soak", Jobs: -1, Shards: 5000, Target: "grpc"}.Validate()
	require.Error(t, err)
	for _, want := range []string{`scenario "soak"`, "jobs -1", "shards 5000", `target "grpc"`} {
		assert.ErrorContains(t, err, want)
	}
	err = Config{Scenario: "crash", Duration: time.Minute, CrashAfter: 40 * time.Second}.Validate()
	assert.ErrorContains(t, err, "do not fit")
	c := Config{Scenario: "crash"}.WithDefaults()
	assert.True(t, c.Processes, "crash always runs processes")
	assert.Equal(t, 2, c.Runners)
}
