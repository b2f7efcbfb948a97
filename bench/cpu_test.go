package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParsePIDStat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		want     uint64
		err      string
	}{
		{"plain", "1234 (java) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 40 0 100 0 0", 300, ""},
		{"name with spaces and parentheses", "77 (a (b) c) R 1 77 77 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 5", 10, ""},
		{"too short", "1 (x) S 1 2 3", 0, "fields after the command name"},
		{"no name", "1 x S", 0, "no command name"},
		{"bad utime", "1 (x) S 1 1 1 0 -1 0 0 0 0 0 u 3 0", 0, "utime"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := parsePIDStat([]byte(tc.in))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestParseMachineStat(t *testing.T) {
	t.Parallel()
	in := "cpu  100 5 50 800 40 3 2 0 0 0\ncpu0 50 2 25 400 20 1 1 0 0 0\nintr 1 2 3\n"
	busy, total, err := parseMachineStat([]byte(in))
	require.NoError(t, err)
	assert.Equal(t, uint64(1000), total) // guest and guest_nice are in user already
	assert.Equal(t, uint64(160), busy)   // total less idle and iowait

	_, _, err = parseMachineStat([]byte("cpu0 1 2 3 4 5 6 7 8\n"))
	require.ErrorContains(t, err, "no cpu line")
	_, _, err = parseMachineStat([]byte("cpu 1 2 3\n"))
	require.ErrorContains(t, err, "want at least 8")
}

func TestSummariseCPU(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	procs := []cpuProcess{{name: "dispatcher-0", role: "pipeline"}, {name: "kafka", role: "backend"}, {name: "redis", role: "backend"}}
	s := func(sec int, busy, total uint64, pt map[string]procTicks) cpuSample {
		return cpuSample{at: t0.Add(time.Duration(sec) * time.Second), procs: pt, busy: busy, total: total}
	}
	samples := []cpuSample{
		s(0, 0, 0, map[string]procTicks{"dispatcher-0": {1, 1000}, "kafka": {9, 500}}),
		// 1 s: the dispatcher used 50 ticks (0.5 cores), kafka 100 (1 core);
		// the machine was not read at 0 s.
		s(1, 180, 200, map[string]procTicks{"dispatcher-0": {1, 1050}, "kafka": {9, 600}}),
		// the dispatcher restarted: the interval does not count for it.
		s(2, 280, 400, map[string]procTicks{"dispatcher-0": {2, 10}, "kafka": {9, 650}}),
		// 2 s: 0.2 cores of the new dispatcher, kafka 0.25.
		s(4, 380, 800, map[string]procTicks{"dispatcher-0": {2, 50}, "kafka": {9, 700}}),
	}
	u := summariseCPU(procs, samples, time.Second, 2, map[string]string{"redis": "not found"})
	require.Len(t, u.Processes, 3)
	d, k, r := u.Processes[0], u.Processes[1], u.Processes[2]
	assert.Equal(t, []int{1, 2}, d.PIDs)
	assert.Equal(t, 2, d.Intervals)
	assert.InDelta(t, 90.0/100/3, d.MeanCores, 1e-9) // 90 ticks over the 3 s measured
	assert.InDelta(t, 0.5, d.MaxCores, 1e-9)
	assert.Equal(t, 3, k.Intervals)
	assert.InDelta(t, 2.0/4, k.MeanCores, 1e-9) // 200 ticks in 4 s
	assert.InDelta(t, 1.0, k.MaxCores, 1e-9)
	assert.Zero(t, r.Intervals)
	assert.Equal(t, "not found", r.Note)
	// The first sample's machine reading is missing: the window's first
	// interval does not count for the machine.
	assert.InDelta(t, 200.0/600, u.MachineBusyMean, 1e-9)
	assert.InDelta(t, 0.5, u.MachineBusyMax, 1e-9)
	require.Len(t, u.Series, 3)
	assert.InDelta(t, -1, u.Series[0].MachineBusyCores, 1e-9)
	assert.Equal(t, []float64{-1, 0.5, -1}, u.Series[1].Cores)
	assert.InDelta(t, 1.0, u.Series[1].MachineBusyCores, 1e-9)
	// 2-4 s: the machine was busy 100 of 400 ticks (0.5 of its 2 cores);
	// the processes measured used 0.45.
	assert.InDelta(t, 0.5, u.Series[2].MachineBusyCores, 1e-9)
	// Not measured: 1 - 0.5 cores for 1 s (the dispatcher restarted), then
	// 0.5 - 0.45 for 2 s.
	assert.InDelta(t, (0.5+2*0.05)/3, u.OtherCoresMean, 1e-9)
}

func TestListeningInodes(t *testing.T) {
	t.Parallel()
	in := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:400B 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 41001 1 0000000000000000 100 0 0 10 0
   1: 0100007F:400B 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 41002 1 0000000000000000 20 4 30 10 -1
   2: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 41003 1 0000000000000000 100 0 0 10 0
`
	assert.Equal(t, []string{"41001"}, listeningInodes([]byte(in), 16395))
	assert.Equal(t, []string{"41003"}, listeningInodes([]byte(in), 8080))
	assert.Empty(t, listeningInodes([]byte(in), 9042))
}

func TestBackendPIDFromPidFileOrPort(t *testing.T) {
	t.Parallel()
	proc, stack := t.TempDir(), t.TempDir()
	write := func(path, s string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(s), 0o644))
	}
	write(filepath.Join(stack, "run", "redis.pid"), "42\n")
	write(filepath.Join(proc, "42", "cmdline"), "/opt/redis/bin/redis-server\x00/stack/run/redis/redis.conf\x00")
	write(filepath.Join(stack, "run", "kafka.pid"), "43\n")
	write(filepath.Join(proc, "43", "cmdline"), "java\x00-Dsundial.stack.component=cassandra\x00")
	write(filepath.Join(proc, "net", "tcp"), "hdr\n 0: 0100007F:4A8C 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 777 1\n")
	require.NoError(t, os.MkdirAll(filepath.Join(proc, "44", "fd"), 0o755))
	require.NoError(t, os.Symlink("socket:[777]", filepath.Join(proc, "44", "fd", "3")))

	pid, how := backendPID(proc, stack, "redis", "127.0.0.1:16379")
	assert.Equal(t, 42, pid)
	assert.Contains(t, how, "pid file")
	// kafka's pid file names a process that is not kafka: the port decides.
	pid, how = backendPID(proc, stack, "kafka", "127.0.0.1:19084")
	assert.Equal(t, 44, pid)
	assert.Contains(t, how, "port 19084")
	pid, how = backendPID(proc, stack, "cassandra", "127.0.0.1:19042")
	assert.Zero(t, pid)
	assert.Contains(t, how, "not found")
}

// The CPU of a window divided among its runs: the machine's busy cores, and
// Sundial's processes, the backends and the bench apart; a process not
// measured counts nothing, and no runs give zeros rather than infinities.
func TestCPUPerRun(t *testing.T) {
	t.Parallel()
	u := CPUUsage{Cores: 2, MachineBusyMean: 0.95, Processes: []ProcessCPU{
		{Name: "bench", Role: "pipeline", MeanCores: 0.44},
		{Name: "dispatcher-0", Role: "pipeline", MeanCores: 0.27},
		{Name: "runner-0", Role: "pipeline", MeanCores: 0.2},
		{Name: "cassandra", Role: "backend", MeanCores: 0.61},
		{Name: "kafka", Role: "backend", MeanCores: 0.39},
		{Name: "api", Role: "control plane", MeanCores: 0.05},
		{Name: "hog", Role: "noisy neighbour", MeanCores: 0.9},
		{Name: "redis", Role: "backend", Note: "not found"},
	}}
	c := cpuPerRun(u, 1000)
	assert.InDelta(t, 1.9, c.MachineMs, 1e-9)
	assert.InDelta(t, 0.47, c.SundialMs, 1e-9)
	assert.InDelta(t, 1.0, c.BackendsMs, 1e-9)
	assert.InDelta(t, 0.44, c.BenchMs, 1e-9)
	assert.Equal(t, CPUPerRun{}, cpuPerRun(u, 0))
}

// A server of many processes (PostgreSQL) is counted with its children:
// the root's own ticks, those of the children it has reaped, and those of
// its live children, so that a child that exits and is reaped leaves the
// sum unchanged; another process's children are not counted.
func TestTreeTicks(t *testing.T) {
	t.Parallel()
	proc := t.TempDir()
	// stat writes a /proc/<pid>/stat line: parent, utime, stime, cutime, cstime.
	stat := func(pid, ppid int, utime, stime, cutime, cstime uint64) {
		dir := filepath.Join(proc, strconv.Itoa(pid))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		line := fmt.Sprintf("%d (postgres: x) S %d %d %d 0 -1 0 0 0 0 0 %d %d %d %d 20 0 1 0 5", pid, ppid, pid, pid, utime, stime, cutime, cstime)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "stat"), []byte(line), 0o644))
	}
	stat(10, 1, 5, 5, 20, 10) // the postmaster: 10 own, 30 reaped
	stat(11, 10, 3, 2, 0, 0)  // a connection's backend: 5
	stat(12, 10, 1, 1, 0, 0)  // another: 2
	stat(13, 1, 100, 100, 0, 0)
	stat(14, 13, 50, 0, 0, 0) // a child of another process
	require.NoError(t, os.MkdirAll(filepath.Join(proc, "net"), 0o755))

	got, err := treeTicks(proc, 10)
	require.NoError(t, err)
	assert.Equal(t, uint64(47), got)

	// Backend 11 exits and is reaped: its 5 ticks move to the root's cutime.
	require.NoError(t, os.RemoveAll(filepath.Join(proc, "11")))
	stat(10, 1, 5, 5, 25, 10)
	got, err = treeTicks(proc, 10)
	require.NoError(t, err)
	assert.Equal(t, uint64(47), got, "a reaped child's ticks are still counted")

	_, err = treeTicks(proc, 99)
	require.Error(t, err, "a root that is gone")
	ticks, err := processTicks(proc, 10, false)
	require.NoError(t, err)
	assert.Equal(t, uint64(10), ticks, "without tree: the process alone")
}
