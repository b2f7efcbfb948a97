package bench

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/store"
)

func TestChaosPlanKills(t *testing.T) {
	t.Parallel()
	procs := []string{"dispatcher-0", "dispatcher-1", "runner-0", "runner-1", "dagengine-0", "dagengine-1"}
	c := ChaosPlan{Window: 10 * time.Minute, Every: 30 * time.Second, Processes: procs, Backends: StackBackends, Seed: 7}
	kills, err := c.Kills()
	require.NoError(t, err)

	var processKills, backendKills []PlannedKill
	for i, k := range kills {
		if i > 0 {
			assert.GreaterOrEqual(t, k.At, kills[i-1].At, "in time order")
		}
		assert.Greater(t, k.At, time.Duration(0))
		assert.Less(t, k.At, c.Window, "inside the window")
		if k.Backend {
			backendKills = append(backendKills, k)
		} else {
			processKills = append(processKills, k)
			assert.Contains(t, procs, k.Target)
		}
	}
	// 15 s, 45 s, ..., 585 s.
	require.Len(t, processKills, 20)
	for i, k := range processKills {
		assert.Equal(t, 15*time.Second+time.Duration(i)*30*time.Second, k.At)
	}
	// Each backend once, in order, half-way between two process kills and
	// spread over the window: after kills 5, 10 and 15.
	require.Len(t, backendKills, 3)
	for i, want := range []time.Duration{150 * time.Second, 300 * time.Second, 450 * time.Second} {
		assert.Equal(t, StackBackends[i], backendKills[i].Target)
		assert.Equal(t, want, backendKills[i].At)
	}
	// Every kind of process is hit over 20 kills (seed 7).
	kinds := map[string]bool{}
	for _, k := range processKills {
		kind, _, _ := strings.Cut(k.Target, "-")
		kinds[kind] = true
	}
	assert.Len(t, kinds, 3)

	again, err := c.Kills()
	require.NoError(t, err)
	assert.Equal(t, kills, again, "the same seed gives the same kills")
	c.Seed = 8
	other, err := c.Kills()
	require.NoError(t, err)
	assert.NotEqual(t, kills, other, "another seed picks other victims")

	// The short development run: 2 minutes, a kill every 20 s: at 10, 30,
	// ..., 110 s.
	short, err := ChaosPlan{Window: 2 * time.Minute, Every: 20 * time.Second, Processes: procs, Backends: StackBackends}.Kills()
	require.NoError(t, err)
	assert.Len(t, short, 6+3)
}

func TestChaosPlanKillsRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		plan ChaosPlan
		want string
	}{
		{"no interval", ChaosPlan{Window: time.Minute, Processes: []string{"runner-0"}}, "every 0s"},
		{"no process", ChaosPlan{Window: time.Minute, Every: 10 * time.Second}, "processes"},
		{"no room for the backends", ChaosPlan{Window: time.Minute, Every: 30 * time.Second, Processes: []string{"runner-0"}, Backends: StackBackends},
			"2 process kills in a window of 1m0s leave no room for 3 backend kills"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := tc.plan.Kills()
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

func TestChaosRecovery(t *testing.T) {
	t.Parallel()
	// p99 of 20 ms until the runner kill at 30 s; slow from 30 to 34;
	// the Kafka kill at 45 s is slow until 75; fine after.
	var series []SeriesPoint
	for s := range 100 {
		p99 := 20.0
		if (s >= 30 && s < 34) || (s >= 45 && s < 75) {
			p99 = 5000
		}
		series = append(series, SeriesPoint{Second: s, Count: 10, P99Ms: p99})
	}
	crashes := []CrashEvent{
		{Process: "runner-1", Kind: "process", KilledAt: from.Add(30 * time.Second)},
		{Process: "kafka", Kind: "backend", KilledAt: from.Add(45 * time.Second)},
		{Process: "dispatcher-0", Kind: "process", KilledAt: from.Add(60 * time.Second)},
	}
	th, rec := recovery(series, from, crashes, 0)
	assert.InDelta(t, 250, th, 1e-9, "twice the undisturbed p99 is below the 250 ms floor")
	assert.InDelta(t, 4, rec, 1e-9)
	_, rec = recovery(series, from, crashes, 1)
	assert.InDelta(t, -1, rec, 1e-9, "still slow when the next kill came")
	_, rec = recovery(series, from, crashes, 2)
	assert.InDelta(t, 15, rec, 1e-9)
	for i, want := range []float64{4, -1, 15} {
		assert.InDelta(t, want, settled(series, from, crashes, i, th), 1e-9, "kill %d settles as it recovers when nothing else is slow", i)
	}

	// One slow second long after the kill: the kill recovered only after
	// it, but it had settled 4 s after the kill.
	series[90].P99Ms = 5000
	_, rec = recovery(series, from, crashes, 2)
	assert.InDelta(t, 31, rec, 1e-9)
	assert.InDelta(t, 15, settled(series, from, crashes, 2, th), 1e-9)
	// Slow seconds four apart never make five in a row.
	for s := 76; s < 100; s += 4 {
		series[s].P99Ms = 5000
	}
	assert.InDelta(t, -1, settled(series, from, crashes, 2, th), 1e-9)
	// The runs due less than a threshold before the next kill count for
	// that kill: the second before a kill at 40 s, slow with the runs
	// queued on its victim, leaves the kill at 10 s recovered after 3 s.
	// A second that ended a threshold or more before the next kill counts.
	queued := make([]SeriesPoint, 50)
	for s := range queued {
		queued[s] = SeriesPoint{Second: s, Count: 10, P99Ms: 20}
		if (s >= 10 && s < 13) || s == 39 {
			queued[s].P99Ms = 5000
		}
	}
	for _, tc := range []struct {
		next   time.Duration
		want   float64
		reason string
	}{
		{40 * time.Second, 3, "second 39 ends less than 250 ms before the kill at 40 s"},
		{40*time.Second + 100*time.Millisecond, 3, "second 39 ends 100 ms before the kill"},
		{40*time.Second + 300*time.Millisecond, -1, "second 39 ends 300 ms before the kill, its runs' lateness is the kill at 10 s's"},
	} {
		two := []CrashEvent{{Process: "runner-1", KilledAt: from.Add(10 * time.Second)}, {Process: "runner-0", KilledAt: from.Add(tc.next)}}
		th, rec := recovery(queued, from, two, 0)
		assert.InDelta(t, 250, th, 1e-9)
		assert.InDelta(t, tc.want, rec, 1e-9, tc.reason)
		assert.InDelta(t, 3, settled(queued, from, two, 0, th), 1e-9, tc.reason)
	}
	// Two kills closer than a threshold: no second counts for the first,
	// which is not shown as recovered.
	near := []CrashEvent{{Process: "runner-1", KilledAt: from.Add(20 * time.Second)}, {Process: "runner-0", KilledAt: from.Add(20*time.Second + 100*time.Millisecond)}}
	_, rec = recovery(queued, from, near, 0)
	assert.InDelta(t, -1, rec, 1e-9)
	assert.InDelta(t, -1, settled(queued, from, near, 0, 250), 1e-9)

	// A kill in the middle of a second: that second counts.
	half := []CrashEvent{{Process: "runner-1", Kind: "process", KilledAt: from.Add(34*time.Second + 500*time.Millisecond)}}
	assert.InDelta(t, 0, settled(series, from, half, 0, th), 1e-9, "the seconds from 34 on are fast")
}

func TestCountDagRuns(t *testing.T) {
	t.Parallel()
	w := DagWorkload{Prefix: "c", Count: 2, Nodes: 3, Every: 10 * time.Second, Start: from, URL: "http://x"}
	require.NoError(t, w.Validate())
	exp := w.Expected(from, from.Add(30*time.Second))
	// DAG 0 at 0, 10, 20 s; DAG 1 (phase 5 s) at 5, 15, 25 s.
	assert.Equal(t, map[string][]string{
		"loadgen.c.dag-0": {"loadgen.c.dag-0@" + ms(from), "loadgen.c.dag-0@" + ms(from.Add(10*time.Second)), "loadgen.c.dag-0@" + ms(from.Add(20*time.Second))},
		"loadgen.c.dag-1": {"loadgen.c.dag-1@" + ms(from.Add(5*time.Second)), "loadgen.c.dag-1@" + ms(from.Add(15*time.Second)), "loadgen.c.dag-1@" + ms(from.Add(25*time.Second))},
	}, exp)

	run := func(id string, due time.Time, status string, active bool) store.DagRun {
		return store.DagRun{ID: id, DagID: strings.Split(id, "@")[0], Due: due, Status: status, Active: active}
	}
	stored := map[string][]store.DagRun{
		"loadgen.c.dag-0": {
			run(exp["loadgen.c.dag-0"][0], from, "succeeded", false),
			run(exp["loadgen.c.dag-0"][1], from.Add(10*time.Second), "running", true), // lost: not ended after the drain
			run(exp["loadgen.c.dag-0"][2], from.Add(20*time.Second), "failed", false),
			run("loadgen.c.dag-0@"+ms(from.Add(-10*time.Second)), from.Add(-10*time.Second), "succeeded", false), // before the window
		},
		"loadgen.c.dag-1": {
			run(exp["loadgen.c.dag-1"][0], from.Add(5*time.Second), "succeeded", false),
			run(exp["loadgen.c.dag-1"][2], from.Add(25*time.Second), "succeeded", false), // 15 s never started
			run("loadgen.c.dag-1@"+ms(from.Add(7*time.Second)), from.Add(7*time.Second), "succeeded", false),
		},
	}
	c := CountDagRuns(exp, stored, from, from.Add(30*time.Second))
	assert.Equal(t, 6, c.Expected)
	assert.Equal(t, 3, c.Succeeded)
	assert.Equal(t, 1, c.Failed)
	assert.Equal(t, 2, c.Lost)
	assert.Equal(t, 1, c.Unexpected)
	assert.Len(t, c.Examples, 4)
	assert.Contains(t, strings.Join(c.Examples, "\n"), "never started")

	spec := w.Spec(1)
	require.Len(t, spec.GetNodes(), 3)
	assert.Equal(t, []string{"n1"}, spec.GetNodes()[2].GetParents())
	assert.Equal(t, "http://x", spec.GetNodes()[0].GetInline().GetTarget().GetHttp().GetUrl())
	assert.Equal(t, from.Add(5*time.Second), spec.GetSchedule().GetInterval().GetStart().AsTime())
	assert.Equal(t, "MISFIRE_POLICY_FIRE_ALL", spec.GetSchedule().GetMisfirePolicy().String())
}

func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

func chaosReport() *Report {
	r := sampleReport()
	r.Scenario = "chaos"
	r.Workload.WindowFrom = from
	r.Workload.WindowTo = from.Add(2 * time.Minute)
	r.Config = Config{Scenario: "chaos", Duration: 2 * time.Minute}.WithDefaults()
	r.Config.ChaosEvery = 20 * time.Second
	s := r.Systems[0]
	plan, err := r.Config.chaosPlan(nil).Kills()
	if err != nil {
		panic(err)
	}
	s.Crash = []CrashEvent{
		{Process: "runner-1", Kind: "process", KilledAt: from.Add(20 * time.Second), Restarted: from.Add(22 * time.Second), RecoverySeconds: 3, SettledSeconds: new(2.0), ThresholdMs: 250},
		{Process: "kafka", Kind: "backend", KilledAt: from.Add(30 * time.Second), Restarted: from.Add(50 * time.Second), RecoverySeconds: -1, SettledSeconds: new(-1.0), ThresholdMs: 250},
		{Process: "dagengine-0", Kind: "process", KilledAt: from.Add(40 * time.Second), Error: "not running when its kill came due"},
		{Process: "runner-0", Kind: "process", KilledAt: from.Add(130 * time.Second), Restarted: from.Add(132 * time.Second)},
		{Process: "redis", Kind: "backend", KilledAt: from.Add(100 * time.Second), Restarted: from.Add(110 * time.Second), RecoverySeconds: 20},
	}
	s.Dags = &DagCounts{DAGs: 20, Nodes: 3, EveryMs: 10000, Expected: 240, Succeeded: 240, EngineLag: 7}
	s.Chaos = &ChaosInfo{Seed: 42, EverySeconds: 20, Plan: plan, ProcessDownSecs: 2, BackendDownSecs: 5,
		Exits: []ProcessExit{{Process: "dispatcher-2", At: from.Add(31 * time.Second), Err: "exit status 1", Restarted: true}}}
	s.Chaos.countKills(s.Crash)
	r.Systems = []System{s}
	r.Targets = targets(r.Config, r)
	return r
}

func TestChaosReport(t *testing.T) {
	t.Parallel()
	r := chaosReport()
	s := r.Systems[0]
	assert.Equal(t, 2, s.Chaos.ProcessKills, "a skipped kill does not count")
	assert.Equal(t, []string{"kafka", "redis"}, s.Chaos.BackendKills)

	got := map[string]Target{}
	for _, tg := range r.Targets {
		got[tg.Name] = tg
	}
	assert.False(t, got["duplicate effects"].Met, "the sample has one duplicate effect")
	assert.True(t, got["lost DAG runs (after the drain)"].Met)
	kills := got["process kills"]
	assert.Equal(t, "≥ 6", kills.Want)
	assert.False(t, kills.Met)
	backends := got["backends killed and restarted ([redis kafka cassandra])"]
	assert.InDelta(t, 2, backends.Value, 1e-9)
	assert.False(t, backends.Met)
	assert.NotContains(t, got, "trigger p95 (ms)", "chaos is judged on loss and effects, not latency")

	dir := filepath.Join(t.TempDir(), "20260301-120000-chaos")
	require.NoError(t, r.Write(dir))
	md, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	require.NoError(t, err)
	for _, want := range []string{
		"## Chaos (sundial): 2 process kills, backends killed: [kafka redis] (seed 42)",
		"| 1 | 20.0 | runner-1 | 2.0 s | 3.0 s | 2.0 s |  |",
		"| 2 | 30.0 | **kafka** (backend) | 20.0 s | not recovered before the next kill | not before the next kill |  |",
		"| 3 | 40.0 | dagengine-0 | - | - | - | not running when its kill came due |",
		"- dispatcher-2 at 12:00:31.000: exit status 1",
		"| 4 | 130.0 | runner-0 | 2.0 s | after the window: not measured | after the window: not measured |  |",
		"| 5 | 100.0 | **redis** (backend) | 10.0 s | ≥ 20.0 s (slow until the end of the window) | not measured |  |",
		"DAG runs due in the window (20 DAGs of 3 nodes every 10s): 240 expected, 240 succeeded, 0 failed, 0 lost, 0 unexpected; DAG engines' lag on sundial.events at the end: 7 records",
		"`chaos-timeline.png`",
	} {
		assert.Contains(t, string(md), want)
	}
	f, err := os.Open(filepath.Join(dir, "chaos-timeline.png"))
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	assert.Greater(t, img.Bounds().Dx(), 1000)
}

func TestChaosConfig(t *testing.T) {
	t.Parallel()
	c := Config{Scenario: "chaos"}.WithDefaults()
	require.NoError(t, c.Validate())
	assert.True(t, c.Processes)
	assert.Equal(t, []int{3, 3, 2}, []int{c.Dispatchers, c.Runners, c.DagEngines})
	assert.Equal(t, 10*time.Minute, c.Duration)
	assert.InDelta(t, 1000, c.Rate, 1e-9)
	assert.Equal(t, StackBackends, c.chaosBackends())

	none := Config{Scenario: "chaos", ChaosBackends: []string{"none"}}.WithDefaults()
	require.NoError(t, none.Validate())
	assert.Empty(t, none.WithDefaults().chaosBackends(), "defaults applied twice keep none")

	err := Config{Scenario: "chaos", Runners: 1, ChaosBackends: []string{"postgres", "redis"}, Duration: 30 * time.Second, ChaosEvery: 30 * time.Second}.Validate()
	for _, want := range []string{"runners 1", `chaos backend "postgres"`, "leave no room"} {
		assert.ErrorContains(t, err, want)
	}
}

// fakeStack writes a stack.sh stand-in answering env with the given
// addresses and status with the given exit code.
func fakeStack(t *testing.T, kafka string, statusCode int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stack.sh")
	script := "#!/bin/sh\ncase $1 in\nenv) echo export SUNDIAL_KAFKA_BROKERS=" + kafka +
		"; echo export SUNDIAL_CASSANDRA_HOSTS=127.0.0.1:39042; echo export SUNDIAL_REDIS_ADDR=127.0.0.1:36379 ;;\n" +
		"status) echo kafka stopped; exit " + strconv.Itoa(statusCode) + " ;;\nesac\n"
	require.NoError(t, os.WriteFile(path, []byte(script), 0o755))
	return path
}

func TestStackCheck(t *testing.T) {
	t.Parallel()
	be := Backends{Brokers: []string{"127.0.0.1:39092"}, CassandraHosts: []string{"127.0.0.1:39042"}, RedisAddr: "localhost:36379"}
	ctx := context.Background()
	require.NoError(t, Stack{Script: fakeStack(t, "127.0.0.1:39092", 0)}.Check(ctx, be))

	err := Stack{Script: fakeStack(t, "127.0.0.1:19092", 0)}.Check(ctx, be)
	assert.ErrorContains(t, err, "kafka brokers [127.0.0.1:39092] is not the stack's 127.0.0.1:19092")
	err = Stack{Script: fakeStack(t, "127.0.0.1:39092", 3)}.Check(ctx, be)
	assert.ErrorContains(t, err, "not every backend is running and ready")
	assert.ErrorContains(t, Stack{}.Check(ctx, be), "stack script: required")
	assert.ErrorContains(t, Stack{Script: "/nonexistent/stack.sh"}.Check(ctx, be), "/nonexistent/stack.sh env")
	assert.ErrorContains(t, Stack{Script: "true"}.Kill(ctx, "postgres"), `backend "postgres"`)
}

func TestParseExports(t *testing.T) {
	t.Parallel()
	got := parseExports([]byte("export A=1\n  export B='x:2'\nnoise\nC=3\n"))
	assert.Equal(t, map[string]string{"A": "1", "B": "x:2", "C": "3"}, got)
	var buf bytes.Buffer
	buf.WriteString("")
	assert.Empty(t, parseExports(buf.Bytes()))
}

// script writes an executable shell script standing in for the sundial
// binary.
func script(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sundial")
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
	return path
}

func TestProcessesSupervise(t *testing.T) {
	t.Parallel()
	cfg := PipelineConfig{Dispatchers: 1, Runners: 1, DagEngines: 1}
	// A process that exits on its own is recorded and started again.
	p := NewProcesses(cfg, script(t, "exit 3"), t.TempDir())
	p.Supervise, p.SuperviseDelay = true, 10*time.Millisecond
	require.NoError(t, p.start("dagengine-0"))
	require.Eventually(t, func() bool { return len(p.Exits()) >= 2 }, 30*time.Second, 10*time.Millisecond, "exits: %v", p.Exits())
	p.Stop()
	exits := p.Exits()
	assert.Equal(t, "dagengine-0", exits[0].Process)
	assert.Equal(t, "exit status 3", exits[0].Err)
	assert.True(t, exits[0].Restarted)
	// Stop returns after every watcher ended, so nothing can restart later.
	assert.False(t, p.Running("dagengine-0"), "nothing runs after Stop")
	assert.ErrorContains(t, p.Restart("dagengine-0"), "stopping")

	// A process killed by the bench is not an exit, and is not restarted
	// by the supervisor.
	q := NewProcesses(cfg, script(t, "exec sleep 60"), t.TempDir())
	q.Supervise, q.SuperviseDelay = true, 10*time.Millisecond
	require.NoError(t, q.start("runner-0"))
	require.True(t, q.Running("runner-0"))
	require.NoError(t, q.Kill("runner-0"))
	assert.False(t, q.Running("runner-0"))
	require.NoError(t, q.Restart("runner-0"))
	assert.True(t, q.Running("runner-0"))
	q.Stop()
	assert.Empty(t, q.Exits())
	assert.Equal(t, []string{"dispatcher-0", "runner-0", "dagengine-0"}, q.Names())
}

func TestCommitLogDurable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode string
		ok   bool
	}{
		{"batch", true},
		{"group", true},
		{"periodic", false},
		{"", false},
	} {
		err := commitLogDurable(tc.mode)
		if tc.ok {
			assert.NoError(t, err, tc.mode)
		} else {
			assert.ErrorContains(t, err, "acknowledges writes a SIGKILL loses", tc.mode)
		}
	}
}

// TestCheckCommitLog reads the setting from the stack's node: the query
// works, and the answer is the stack's (batch) or a refusal naming the
// node's mode.
func TestCheckCommitLog(t *testing.T) {
	t.Parallel()
	env := testenv.NeedCassandra(t)
	err := CheckCommitLog(t.Context(), env.Hosts)
	if err != nil {
		assert.ErrorContains(t, err, "commitlog_sync is \"periodic\"", "the only other mode a node answers")
	}
}
