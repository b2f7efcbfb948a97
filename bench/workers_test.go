package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/internal/testenv"
)

func TestGatewayWorkers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, text string
		want       int
		bad        bool
	}{
		{name: "no gateway metric", text: "# HELP go_goroutines x\ngo_goroutines 12\n", want: 0},
		{name: "one team", text: "# TYPE sundial_gateway_workers gauge\nsundial_gateway_workers{team=\"loadgen\"} 2\n", want: 2},
		{name: "teams are summed", text: "sundial_gateway_workers{team=\"a\"} 1\nsundial_gateway_workers{team=\"b\"} 3\n", want: 4},
		{name: "a label value with a space and a timestamp", text: "sundial_gateway_workers{team=\"a b\"} 2 1700000000000\n", want: 2},
		{name: "another metric of the same prefix", text: "sundial_gateway_workers_lost_total{team=\"a\"} 7\nsundial_gateway_workers{team=\"a\"} 1\n", want: 1},
		{name: "a value that is no number", text: "sundial_gateway_workers{team=\"a\"} many\n", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n, err := gatewayWorkers(strings.NewReader(tc.text))
			if tc.bad {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, n)
		})
	}
}

func TestStartsPerSecond(t *testing.T) {
	t.Parallel()
	from := time.UnixMilli(10_000)
	for _, tc := range []struct {
		name   string
		starts []int64
		want   []int
	}{
		{name: "none", starts: nil, want: nil},
		{name: "before the window: left out", starts: []int64{9_999, 10_000}, want: []int{1}},
		{name: "by the second they fall in", starts: []int64{10_000, 10_999, 11_000, 13_500}, want: []int{2, 1, 0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, startsPerSecond(tc.starts, from))
		})
	}
}

func TestWorkersDefaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		in           Config
		workers, per int
	}{
		{name: "the runner's default workers shared by 2", in: Config{Scenario: "workers"}, workers: 2, per: 128},
		{name: "runners × concurrency, rounded up", in: Config{Scenario: "workers", Runners: 2, RunnerConcurrency: 25, Workers: 3}, workers: 3, per: 17},
		{name: "as given", in: Config{Scenario: "workers", Workers: 4, WorkerSlots: 8}, workers: 4, per: 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := tc.in.WithDefaults()
			assert.Equal(t, tc.workers, c.Workers)
			assert.Equal(t, tc.per, c.WorkerSlots)
			assert.Equal(t, 30_000, c.Jobs)
			assert.InDelta(t, 500, c.Rate, 0)
			assert.Equal(t, 2*time.Minute, c.Duration)
			require.NoError(t, c.Validate())
		})
	}
	err := Config{Scenario: "workers", Target: "noop"}.Validate()
	require.ErrorContains(t, err, `target "noop"`)
}

// TestWorkersWorkload: every job of the workers scenario runs the handler,
// of the team whose token the SDK workers hold.
func TestWorkersWorkload(t *testing.T) {
	t.Parallel()
	b := &Bench{Now: time.Now}
	plan, err := b.plan(Config{Scenario: "workers", Jobs: 100, Rate: 10, Duration: time.Minute}.WithDefaults(), "w1", "http://127.0.0.1:1/effect")
	require.NoError(t, err)
	for i := range plan.Jobs {
		spec := plan.Spec(i)
		assert.Equal(t, WorkersHandler, spec.GetTarget().GetHandler().GetName())
		assert.Equal(t, workersTeam, spec.GetOwnerTeam())
	}
}

func goldenWorkers() *Report {
	r := sampleReport()
	r.Scenario = "workers"
	r.Config = Config{Scenario: "workers", Pipeline: "in-process: test", Workers: 2, WorkerSlots: 128}
	stock, sdk := r.Systems[0], r.Systems[1]
	stock.Name = "stock runner"
	stock.Effects.DuplicateEffects = 0
	stock.CPU = goldenCPU(2)
	pr := cpuPerRun(*stock.CPU, stock.SustainedPerSec)
	stock.CPUPerRun = &pr
	stock.StartsPerSec = []int{2000, 2100, 2200}
	sdk.Name = "sdk workers"
	sdk.Effects.DuplicateEffects = 0
	sdk.SustainedPerSec = 1300
	sdk.CPU = goldenCPU(2)
	sdk.CPU.Processes = append(sdk.CPU.Processes, ProcessCPU{Name: "gateway", Role: "pipeline", PIDs: []int{400}, MeanCores: 0.3, MaxCores: 0.4, Intervals: 59},
		ProcessCPU{Name: "worker-0", Role: "pipeline", PIDs: []int{401}, MeanCores: 0.1, MaxCores: 0.2, Intervals: 59})
	sdk.CPU.Series = []CPUPoint{{Second: 1, Cores: []float64{0.3, 0.6, -1, 0.4, 0.2, 0.3, 0.1}, MachineBusyCores: 1.9}}
	pw := cpuPerRun(*sdk.CPU, sdk.SustainedPerSec)
	sdk.CPUPerRun = &pw
	sdk.StartsPerSec = []int{1200, 1300, 1400}
	r.Systems = []System{stock, sdk}
	r.Targets = targets(r.Config, r)
	return r
}

// TestWorkersTargets: each system's losses, and the SDK system's rate
// against the stock runner's.
func TestWorkersTargets(t *testing.T) {
	t.Parallel()
	r := goldenWorkers()
	met := map[string]bool{}
	for _, tg := range r.Targets {
		met[tg.Name] = tg.Met
	}
	assert.True(t, met["stock runner: lost + duplicate executions + duplicate effects"])
	assert.True(t, met["sdk workers: lost + duplicate executions + duplicate effects"])
	assert.True(t, met["sdk workers runs/s / stock runner runs/s (1300 / 2100)"], "%v", r.Targets)

	r.Systems[1].SustainedPerSec = 1000
	r.Systems[1].Counts.Lost = 1
	r.Targets = targets(r.Config, r)
	met = map[string]bool{}
	for _, tg := range r.Targets {
		met[tg.Name] = tg.Met
	}
	assert.False(t, met["sdk workers: lost + duplicate executions + duplicate effects"])
	assert.False(t, met["sdk workers runs/s / stock runner runs/s (1000 / 2100)"], "%v", r.Targets)
}

func TestWorkersReportWrite(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "20260301-120000-workers")
	require.NoError(t, goldenWorkers().Write(dir))
	for _, f := range []string{"report.json", "summary.md", "workers-runs-per-second.png", "latency-distribution.png"} {
		_, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err, f)
	}
}

// TestWorkersScenario runs a small workers scenario on the real stack,
// with the gateway and the SDK workers child processes of a freshly built
// binary: both systems start every run of their window once, with no
// duplicate effect, and the SDK system's effects are its workers' (its
// runner has no handler), whose processes the CPU sampler read.
func TestWorkersScenario(t *testing.T) {
	t.Parallel()
	k := testenv.NeedKafka(t)
	c := testenv.NeedCassandra(t)
	rd := testenv.NeedRedis(t)
	var progress bytes.Buffer
	b := &Bench{
		Config: Config{Scenario: "workers", Jobs: 40, Rate: 4, Duration: 10 * time.Second, Lead: 15 * time.Second, Drain: 3 * time.Minute,
			BaselineDuration: time.Second, Shards: 8, Workers: 2, WorkerSlots: 4, Binary: testenv.BuildSundial(t), ResultsDir: t.TempDir()},
		Backends: Backends{Brokers: k.Brokers, CassandraHosts: c.Hosts, RedisAddr: rd.Addr},
		Progress: &syncWriter{w: &progress},
	}
	dir, rep, err := b.Run(t.Context())
	require.NoError(t, err, "progress:\n%s", &progress)
	require.Len(t, rep.Systems, 2)
	for i, name := range []string{"stock runner", "sdk workers"} {
		s := rep.Systems[i]
		assert.Equal(t, name, s.Name)
		assert.Positive(t, s.Counts.Expected, name)
		assert.Zero(t, s.Counts.Lost, name)
		assert.Zero(t, s.Counts.DuplicateExecutions, name)
		assert.Zero(t, s.Effects.DuplicateEffects, name)
		assert.Positive(t, s.Effects.Keys, "%s: the handler applied the effects", name)
		require.NotNil(t, s.CPU, name)
	}
	measured := map[string]bool{}
	for _, p := range rep.Systems[1].CPU.Processes {
		measured[p.Name] = len(p.PIDs) > 0
	}
	for _, n := range []string{"gateway", "worker-0", "worker-1"} {
		assert.True(t, measured[n], "the CPU of %s is sampled: %v", n, rep.Systems[1].CPU.Processes)
	}
	var names []string
	for _, tg := range rep.Targets {
		names = append(names, tg.Name)
	}
	assert.Contains(t, strings.Join(names, "\n"), "sdk workers runs/s / stock runner runs/s")
	_, err = os.Stat(filepath.Join(dir, "workers-runs-per-second.png"))
	require.NoError(t, err)
}
