package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// userHZ is the unit of the CPU times of /proc/<pid>/stat and /proc/stat
// (USER_HZ): 100 ticks a second on every architecture Go runs Linux on.
const userHZ = 100

// parsePIDStat reads utime + stime, in ticks, from the text of
// /proc/<pid>/stat. The command name (field 2, in parentheses) may hold
// spaces and parentheses, so the fields are counted from its last ')'.
func parsePIDStat(b []byte) (uint64, error) {
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	f, err := statFields(b, 13)
	if err != nil {
		return 0, err
	}
	utime, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("proc stat: utime: %w", err)
	}
	stime, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("proc stat: stime: %w", err)
	}
	return utime + stime, nil
}

// treeTicks is the CPU ticks of process root and its children: root's
// utime + stime, the CPU of the children it has reaped (cutime + cstime,
// fields 16 and 17), and the utime + stime of every live process whose
// parent is root. A child that exits moves its ticks from the last term
// to the second once reaped, so the sum never drops. PostgreSQL serves
// each connection from a child of its postmaster.
func treeTicks(proc string, root int) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(root), "stat"))
	if err != nil {
		return 0, err
	}
	f, err := statFields(b, 15)
	if err != nil {
		return 0, err
	}
	var sum uint64
	for i, name := range []string{"utime", "stime", "cutime", "cstime"} {
		v, err := strconv.ParseUint(f[11+i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("proc stat: %s: %w", name, err)
		}
		sum += v
	}
	entries, err := os.ReadDir(proc)
	if err != nil {
		return 0, err
	}
	parent := strconv.Itoa(root)
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil || e.Name() == parent {
			continue
		}
		b, err := os.ReadFile(filepath.Join(proc, e.Name(), "stat"))
		if err != nil {
			continue // gone since the listing
		}
		if f, err := statFields(b, 2); err != nil || f[1] != parent {
			continue
		}
		if t, err := parsePIDStat(b); err == nil {
			sum += t
		}
	}
	return sum, nil
}

// statFields are the fields of a /proc/<pid>/stat line after the command
// name (f[0] is field 3, the state), at least want of them.
func statFields(b []byte, want int) ([]string, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, errors.New("proc stat: no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < want {
		return nil, fmt.Errorf("proc stat: %d fields after the command name, want at least %d", len(f), want)
	}
	return f, nil
}

// parseMachineStat reads the machine's busy and total CPU ticks, summed
// over its cores, from the "cpu " line of /proc/stat: total is user, nice,
// system, idle, iowait, irq, softirq and steal (guest time is counted in
// user already); busy is total less idle and iowait.
func parseMachineStat(b []byte) (busy, total uint64, err error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "cpu" {
			continue
		}
		if len(f) < 9 {
			return 0, 0, fmt.Errorf("proc stat: cpu line has %d values, want at least 8", len(f)-1)
		}
		var v [8]uint64
		for i := range v {
			if v[i], err = strconv.ParseUint(f[i+1], 10, 64); err != nil {
				return 0, 0, fmt.Errorf("proc stat: cpu value %d: %w", i+1, err)
			}
			total += v[i]
		}
		return total - v[3] - v[4], total, nil
	}
	return 0, 0, errors.New("proc stat: no cpu line")
}

// cpuProcess is a process whose CPU is sampled.
type cpuProcess struct {
	name string
	// role: "backend", "pipeline", "control plane" (the API watch's server) or "noisy neighbour" (the hog).
	role string
	// pid finds the process now; ok false when it is not running or was not
	// found (note says why).
	pid func() (pid int, ok bool, note string)
	// tree counts the process's children too (treeTicks): a server of
	// many processes.
	tree bool
}

// procTicks is one reading of a process: its pid and utime + stime.
type procTicks struct {
	pid   int
	ticks uint64
}

// cpuSample is one reading of every process and of the machine.
type cpuSample struct {
	at time.Time
	// procs: by process name; a process that could not be read is missing.
	procs map[string]procTicks
	// busy and total ticks of the machine; total 0 when /proc/stat could
	// not be read.
	busy, total uint64
}

// CPUUsage is where the machine's CPU went during the measured window.
type CPUUsage struct {
	SampleEverySeconds float64 `json:"sample_every_seconds"`
	// Cores of the machine.
	Cores     int          `json:"cores"`
	Processes []ProcessCPU `json:"processes"`
	// MachineBusyMean and MachineBusyMax: the machine's busy share of its
	// cores (1 - idle - iowait), over the window and in the busiest
	// interval.
	MachineBusyMean float64 `json:"machine_busy_mean"`
	MachineBusyMax  float64 `json:"machine_busy_max"`
	// OtherCoresMean: the machine's busy cores not accounted for by the
	// processes measured, on average.
	OtherCoresMean float64 `json:"other_cores_mean"`
	// Series: cores used in each interval, for the plot.
	Series []CPUPoint `json:"series,omitempty"`
}

// ProcessCPU is one process's CPU over the window, in cores (CPU seconds
// per second).
type ProcessCPU struct {
	Name string `json:"name"`
	Role string `json:"role"`
	// PIDs it had during the window (more than one after a restart).
	PIDs      []int   `json:"pids,omitempty"`
	MeanCores float64 `json:"mean_cores"`
	MaxCores  float64 `json:"max_cores"`
	// Intervals: sampling intervals measured (both ends read, same pid).
	Intervals int `json:"intervals"`
	// Note says why the process was not measured, or only in part.
	Note string `json:"note,omitempty"`
}

// CPUPerRun is the CPU one run cost during the measured window, in
// milliseconds of CPU (CPU-seconds per second of cores, divided by runs per
// second): the figure "half the CPU per run" is judged on, comparable
// between runs at different rates.
type CPUPerRun struct {
	// RunsPerSec is the rate divided by: the sustained triggers/s, or a
	// herd's drain rate.
	RunsPerSec float64 `json:"runs_per_sec"`
	// MachineMs: the whole machine's busy CPU (every process, backends,
	// the bench itself and anything else) per run.
	MachineMs float64 `json:"machine_ms"`
	// SundialMs: Sundial's own processes (the pipeline's, without the
	// bench's load generator and downstream).
	SundialMs float64 `json:"sundial_ms"`
	// BackendsMs: Kafka, Cassandra and Redis.
	BackendsMs float64 `json:"backends_ms"`
	// BenchMs: the bench process (load generator, recorder, downstream).
	BenchMs float64 `json:"bench_ms"`
}

// cpuPerRun divides the CPU of u among runsPerSec runs a second. A process
// that was not measured counts 0; a rate of 0 gives zeros.
func cpuPerRun(u CPUUsage, runsPerSec float64) CPUPerRun {
	c := CPUPerRun{RunsPerSec: runsPerSec}
	if runsPerSec <= 0 {
		return c
	}
	ms := func(cores float64) float64 { return 1000 * cores / runsPerSec }
	c.MachineMs = ms(u.MachineBusyMean * float64(u.Cores))
	for _, p := range u.Processes {
		switch {
		case p.Name == "bench":
			c.BenchMs += ms(p.MeanCores)
		case p.Role == "pipeline":
			c.SundialMs += ms(p.MeanCores)
		case p.Role == "backend":
			c.BackendsMs += ms(p.MeanCores)
		}
	}
	return c
}

// CPUPoint is the cores used in one sampling interval.
type CPUPoint struct {
	// Second: the interval's end, in seconds since the first sample.
	Second float64 `json:"second"`
	// Cores by process, in the order of CPUUsage.Processes; -1 when the
	// process was not measured in the interval.
	Cores []float64 `json:"cores"`
	// MachineBusyCores: the machine's busy cores; -1 when not read.
	MachineBusyCores float64 `json:"machine_busy_cores"`
}

// summariseCPU turns samples (in time order) into each process's mean and
// max cores, the machine's busy share and a series. An interval counts for
// a process when both its ends read the same pid with ticks that did not
// go down (a restarted process starts again from 0). notes are the
// reasons a process was not found, by name.
func summariseCPU(procs []cpuProcess, samples []cpuSample, every time.Duration, cores int, notes map[string]string) CPUUsage {
	u := CPUUsage{SampleEverySeconds: every.Seconds(), Cores: cores}
	type acc struct {
		ticks   uint64
		seconds float64
		max     float64
		n       int
		pids    []int
	}
	accs := make([]acc, len(procs))
	for i, p := range procs {
		for _, s := range samples {
			if pt, ok := s.procs[p.name]; ok && (len(accs[i].pids) == 0 || accs[i].pids[len(accs[i].pids)-1] != pt.pid) {
				accs[i].pids = append(accs[i].pids, pt.pid)
			}
		}
	}
	var busy, total uint64
	var measured, machineSecs float64
	for k := 1; k < len(samples); k++ {
		a, b := samples[k-1], samples[k]
		dt := b.at.Sub(a.at).Seconds()
		if dt <= 0 {
			continue
		}
		pt := CPUPoint{Second: b.at.Sub(samples[0].at).Seconds(), Cores: make([]float64, len(procs)), MachineBusyCores: -1}
		var sum float64
		for i, p := range procs {
			pa, okA := a.procs[p.name]
			pb, okB := b.procs[p.name]
			if !okA || !okB || pa.pid != pb.pid || pb.ticks < pa.ticks {
				pt.Cores[i] = -1
				continue
			}
			d := pb.ticks - pa.ticks
			c := float64(d) / userHZ / dt
			accs[i].ticks += d
			accs[i].seconds += dt
			accs[i].max = max(accs[i].max, c)
			accs[i].n++
			pt.Cores[i] = c
			sum += c
		}
		if a.total > 0 && b.total > a.total && b.busy >= a.busy {
			share := float64(b.busy-a.busy) / float64(b.total-a.total)
			busy += b.busy - a.busy
			total += b.total - a.total
			u.MachineBusyMax = max(u.MachineBusyMax, share)
			pt.MachineBusyCores = share * float64(cores)
			measured += max(pt.MachineBusyCores-sum, 0) * dt
			machineSecs += dt
		}
		u.Series = append(u.Series, pt)
	}
	u.MachineBusyMean = safeDiv(float64(busy), float64(total))
	u.OtherCoresMean = safeDiv(measured, machineSecs)
	for i, p := range procs {
		a := accs[i]
		pc := ProcessCPU{Name: p.name, Role: p.role, PIDs: a.pids, MaxCores: a.max, Intervals: a.n,
			MeanCores: safeDiv(float64(a.ticks)/userHZ, a.seconds), Note: notes[p.name]}
		if a.n == 0 && pc.Note == "" {
			pc.Note = "not measured: never read at both ends of an interval"
		}
		u.Processes = append(u.Processes, pc)
	}
	return u
}

// cpuSampler reads the CPU times of processes and of the machine at an
// interval.
type cpuSampler struct {
	procs []cpuProcess
	every time.Duration
	now   func() time.Time
	// proc is the /proc folder; default /proc.
	proc string

	mu      sync.Mutex
	samples []cpuSample
	notes   map[string]string
}

// run samples from from until to (both included), or until ctx ends.
func (s *cpuSampler) run(ctx context.Context, from, to time.Time) {
	if !sleepUntil(ctx, from) {
		return
	}
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		s.sample()
		if !s.now().Before(to) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *cpuSampler) sample() {
	proc := s.proc
	if proc == "" {
		proc = "/proc"
	}
	sm := cpuSample{at: s.now(), procs: map[string]procTicks{}}
	notes := map[string]string{}
	for _, p := range s.procs {
		pid, ok, note := p.pid()
		if !ok {
			notes[p.name] = note
			continue
		}
		ticks, err := processTicks(proc, pid, p.tree)
		if err != nil {
			notes[p.name] = err.Error()
			continue
		}
		sm.procs[p.name] = procTicks{pid: pid, ticks: ticks}
	}
	if b, err := os.ReadFile(filepath.Join(proc, "stat")); err == nil {
		if busy, total, err := parseMachineStat(b); err == nil {
			sm.busy, sm.total = busy, total
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples = append(s.samples, sm)
	if s.notes == nil {
		s.notes = map[string]string{}
	}
	for name, n := range notes {
		if _, seen := s.notes[name]; !seen {
			s.notes[name] = n // the first reason is the telling one
		}
	}
}

// processTicks reads the CPU ticks of process pid, with its children's
// when tree is set.
func processTicks(proc string, pid int, tree bool) (uint64, error) {
	if tree {
		return treeTicks(proc, pid)
	}
	b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	return parsePIDStat(b)
}

// report summarises the samples taken.
func (s *cpuSampler) report(cores int) *CPUUsage {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := summariseCPU(s.procs, s.samples, s.every, cores, s.notes)
	return &u
}

// cpuView is the CPU section of a system's window.
type cpuView struct {
	System string
	Table  *cpuTableView
}

// cpuTableView is the table of a CPUUsage.
type cpuTableView struct {
	*CPUUsage
	Rows []cpuRow
	// SumCores: the mean cores of the processes measured.
	SumCores float64
	// BusyCores and MaxBusyCores: the machine's busy share, mean and in
	// the busiest interval, in cores.
	BusyCores, MaxBusyCores float64
}

// cpuRow is one process of the table.
type cpuRow struct {
	ProcessCPU
	// PIDList is the pids, comma separated; Measured: at least one
	// interval was.
	PIDList  string
	Measured bool
}

// cpuTableSummary builds the table of u.
func cpuTableSummary(u *CPUUsage) *cpuTableView {
	v := &cpuTableView{CPUUsage: u, BusyCores: u.MachineBusyMean * float64(u.Cores), MaxBusyCores: u.MachineBusyMax * float64(u.Cores)}
	for _, pc := range u.Processes {
		pids := make([]string, len(pc.PIDs))
		for i, pid := range pc.PIDs {
			pids[i] = strconv.Itoa(pid)
		}
		row := cpuRow{ProcessCPU: pc, PIDList: strings.Join(pids, ", "), Measured: pc.Intervals > 0}
		if row.Measured {
			v.SumCores += pc.MeanCores
		}
		v.Rows = append(v.Rows, row)
	}
	return v
}

// windowWatch is the profiler and the CPU sampler of one measured window.
type windowWatch struct {
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	profiles []Profile
	cpu      *cpuSampler
}

// watchWindow starts profiling and sampling the CPU of the bench process,
// the pipeline's subprocesses (procs, nil when the pipeline is in-process),
// the CPU hog and the stack's backends over the window [from, to).
func (b *Bench) watchWindow(ctx context.Context, cfg Config, procs *Processes, from, to time.Time) *windowWatch {
	targets := []profileTarget{{name: "bench"}}
	if procs != nil {
		for _, n := range procs.Names() {
			targets = append(targets, profileTarget{name: n, addr: func() (string, bool) { return procs.PprofAddr(n) }})
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &windowWatch{cancel: cancel, cpu: &cpuSampler{procs: b.cpuProcesses(cfg, procs), every: time.Second, now: b.Now}}
	prof := &profiler{targets: targets, span: cfg.ProfileSpan, skipBenchCPU: b.CPUProfile != "", client: &http.Client{}, now: b.Now}
	w.wg.Go(func() { w.profiles = prof.run(ctx, from, to) })
	w.wg.Go(func() { w.cpu.run(ctx, from, to) })
	return w
}

// cpuProcesses are the processes whose CPU the bench samples: the stack's
// backends, the bench process, the pipeline's subprocesses (procs, nil when
// the pipeline is in-process), the gateway and the SDK workers of a
// workers run, the API server of an API watch and the CPU hog.
func (b *Bench) cpuProcesses(cfg Config, procs *Processes) []cpuProcess {
	self := os.Getpid()
	cpuProcs := backendCPUProcesses(stackDir(cfg.StackScript), b.Backends)
	cpuProcs = append(cpuProcs, cpuProcess{name: "bench", role: "pipeline", pid: func() (int, bool, string) { return self, true, "" }})
	if procs != nil {
		for _, n := range procs.Names() {
			cpuProcs = append(cpuProcs, cpuProcess{name: n, role: "pipeline", pid: func() (int, bool, string) {
				pid, ok := procs.PID(n)
				return pid, ok, "not running"
			}})
		}
	}
	if b.workers != nil {
		wk := b.workers
		for _, n := range wk.Names() {
			cpuProcs = append(cpuProcs, cpuProcess{name: n, role: "pipeline", pid: func() (int, bool, string) {
				pid, ok := wk.PID(n)
				return pid, ok, "not running"
			}})
		}
	}
	if b.api != nil {
		api := b.api
		cpuProcs = append(cpuProcs, cpuProcess{name: "api", role: "control plane", pid: func() (int, bool, string) {
			pid, ok := api.PID()
			return pid, ok, "not running"
		}})
	}
	if b.hog != nil {
		hog := b.hog
		cpuProcs = append(cpuProcs, cpuProcess{name: "hog", role: "noisy neighbour", pid: func() (int, bool, string) {
			if exited, _ := hog.Exited(); exited {
				return 0, false, "exited"
			}
			return hog.PID(), true, ""
		}})
	}
	return cpuProcs
}

// wait waits until the window's profiles are taken and its last CPU sample
// read, and returns them.
func (w *windowWatch) wait() ([]Profile, *CPUUsage) {
	w.wg.Wait()
	return w.profiles, w.cpu.report(runtime.NumCPU())
}

// stop ends the profiling and the sampling early, and waits for them.
func (w *windowWatch) stop() {
	w.cancel()
	w.wg.Wait()
}

// backendCPUProcesses are the stack's backends, found by backendPID in
// the stack folder dir; a backend's pid is looked up again once its
// process is gone (a restart).
func backendCPUProcesses(dir string, be Backends) []cpuProcess {
	addrs := map[string]string{"redis": be.RedisAddr}
	if len(be.Brokers) > 0 {
		addrs["kafka"] = be.Brokers[0]
	}
	if len(be.CassandraHosts) > 0 {
		h := be.CassandraHosts[0]
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(h, "9042")
		}
		addrs["cassandra"] = h
	}
	var out []cpuProcess
	for _, backend := range []string{"kafka", "cassandra", "redis"} {
		out = append(out, cpuProcess{name: backend, role: "backend", pid: cachedPID(func() (int, string) {
			return backendPID("/proc", dir, backend, addrs[backend])
		})})
	}
	return out
}

// cachedPID finds a process with find (pid 0 when not found, and why) and
// keeps its pid while the process lives, so that a sampler does not search
// every second; once it is gone (a restart) find runs again.
func cachedPID(find func() (int, string)) func() (int, bool, string) {
	var pid int
	return func() (int, bool, string) {
		if pid != 0 {
			if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err == nil {
				return pid, true, ""
			}
		}
		p, how := find()
		pid = p
		return p, p != 0, how
	}
}
