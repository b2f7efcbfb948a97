package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/assemble"
	"github.com/sundialhq/sundial/audit"
	"github.com/sundialhq/sundial/dispatcher"
	"github.com/sundialhq/sundial/enqueue"
	"github.com/sundialhq/sundial/history"
	"github.com/sundialhq/sundial/internal/lifecycle"
	"github.com/sundialhq/sundial/internal/telemetry"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/registry"
	"github.com/sundialhq/sundial/runner"
	"github.com/sundialhq/sundial/runner/egress"
	"github.com/sundialhq/sundial/runner/target"
	"github.com/sundialhq/sundial/store/cassandra"
)

// PipelineConfig says how the pipeline under test is run.
type PipelineConfig struct {
	Backends  Backends
	Namespace Namespace
	// Dispatchers and Runners are how many of each run.
	Dispatchers, Runners int
	// DagEngines is how many `sundial dag engine` subprocesses run
	// (Processes only; 0: none).
	DagEngines int
	// RunnerConcurrency is each runner's worker count (0: its default).
	RunnerConcurrency int
	// MemoryLimitMiB is the subprocesses' --memory-limit-mib (0: none).
	MemoryLimitMiB int
	// RunnerHTTPIdleConns, when positive, gives in-process runners an HTTP
	// client keeping that many idle connections per host; 0 keeps the
	// runner's default client (as `sundial runner` has).
	RunnerHTTPIdleConns int
	// RegistryConcurrency is the registry's Concurrency (0: its default).
	RegistryConcurrency int
	// History also runs a history writer per runner (as `sundial runner`
	// does by default).
	History bool
	// EffectURL, when set, compiles WorkersHandler into the in-process
	// runners: it applies each run's effect at the counting downstream of
	// this URL (the workers scenario's stock runner).
	EffectURL string
	Logger    *slog.Logger
}

func (c PipelineConfig) groups() (registryG, dispatcherG, runnerG, historyG string) {
	p := c.Namespace.TopicPrefix
	return p + "registry", p + "dispatchers", p + "runners", p + "history"
}

// dagGroups are the DAG engines' groups on sundial.events and sundial.jobs.
func (c PipelineConfig) dagGroups() (eventsG, definitionsG string) {
	p := c.Namespace.TopicPrefix
	return p + "dagengine", p + "dagdefinitions"
}

// InProcess runs the registry, the dispatchers, the runners and the history
// writers as components of this process, against the real stack.
type InProcess struct {
	cfg  PipelineConfig
	life lifecycle.Lifecycle
	st   *cassandra.Store // set by Start
	rc   *redis.Client    // set by Start
	// work counts each component's backend work, by component; set by
	// Start.
	work map[string]*telemetry.WorkCounter
}

// NewInProcess returns a pipeline that is not started.
func NewInProcess(cfg PipelineConfig) *InProcess { return &InProcess{cfg: cfg} }

// Store is the pipeline's store, open after Start.
func (p *InProcess) Store() *cassandra.Store { return p.st }

// Redis is the pipeline's Redis client, open after Start.
func (p *InProcess) Redis() *redis.Client { return p.rc }

// Describe names how the pipeline runs.
func (p *InProcess) Describe() string {
	return fmt.Sprintf("in-process: 1 registry (concurrency %s, audit trail and quotas), %d dispatcher(s), %d runner(s) (concurrency %s), history=%v",
		orDefault(p.cfg.RegistryConcurrency), p.cfg.Dispatchers, p.cfg.Runners, orDefault(p.cfg.RunnerConcurrency), p.cfg.History)
}

// Start opens the store and Redis and starts every component. On error,
// what was started is stopped again.
func (p *InProcess) Start(ctx context.Context) error {
	return p.life.Start(ctx, p.start)
}

func (p *InProcess) start(ctx context.Context, run *lifecycle.Run) error {
	c := p.cfg
	names := c.Namespace.Names()
	log := c.Logger
	regG, dispG, runG, histG := c.groups()
	// Each component has clients of its own, counted by a WorkCounter of
	// its own, so that the backend work of a run splits by component.
	p.work = map[string]*telemetry.WorkCounter{}
	counter := func(component string) *telemetry.WorkCounter {
		w := &telemetry.WorkCounter{}
		p.work[component] = w
		return w
	}
	open := func(w *telemetry.WorkCounter) (*cassandra.Store, error) {
		st, err := cassandra.Open(ctx, cassandra.Config{Hosts: c.Backends.CassandraHosts, Keyspace: c.Namespace.Keyspace,
			QueryObserver: w, BatchObserver: w})
		if err != nil {
			return nil, fmt.Errorf("pipeline: cassandra: %w", err)
		}
		run.OnStop(func() { _ = st.Close() })
		return st, nil
	}
	kafkaOf := func(w *telemetry.WorkCounter) ([]kgo.Opt, error) {
		kafka, err := c.Backends.kafka(w.KafkaHooks())
		if err != nil {
			return nil, fmt.Errorf("pipeline: %w", err)
		}
		return slices.Clip(kafka), nil
	}
	// enqueuer is an enqueuer of the component counted by w.
	enqueuer := func(st *cassandra.Store, w *telemetry.WorkCounter, shards int) (*enqueue.Enqueuer, *kgo.Client, error) {
		kafka, err := kafkaOf(w)
		if err != nil {
			return nil, nil, err
		}
		cl, err := kgo.NewClient(append(kafka, kgo.RecordPartitioner(enqueue.Partitioner(names, nil)))...)
		if err != nil {
			return nil, nil, fmt.Errorf("pipeline: enqueue client: %w", err)
		}
		run.OnStop(cl.Close)
		enq, err := enqueue.New(enqueue.Config{Store: st, Client: cl, Topics: names, Shards: shards, Logger: log})
		if err != nil {
			return nil, nil, err
		}
		return enq, cl, nil
	}

	regWork := counter("registry")
	st, err := open(regWork)
	if err != nil {
		return err
	}
	p.st = st
	cluster, err := st.GetClusterConfig(ctx)
	if err != nil {
		return fmt.Errorf("pipeline: %w", err)
	}
	rc := redis.NewClient(&redis.Options{Addr: c.Backends.RedisAddr, PoolSize: 128})
	p.rc = rc
	run.OnStop(func() { _ = rc.Close() })

	enq, enqClient, err := enqueuer(st, regWork, cluster.Shards)
	if err != nil {
		return err
	}
	regKafka, err := kafkaOf(regWork)
	if err != nil {
		return err
	}
	// The registry keeps the audit trail and enforces team quotas, as
	// `sundial registry` always does: registration is measured with the
	// work a deployment does per definition.
	trail, err := audit.New(audit.Config{Store: st, Producer: enqClient, Topic: names.Audit(), Retention: audit.DefaultRetention})
	if err != nil {
		return fmt.Errorf("pipeline: %w", err)
	}
	// The benchmark's one writer produces to the shared sundial.jobs.
	reg, err := registry.New(registry.Config{Kafka: regKafka, Topics: names, Group: regG, Store: st, Waker: enq, SharedTopic: true,
		Audit: trail, Quotas: st,
		Concurrency: c.RegistryConcurrency,
		Registerer:  prometheus.NewRegistry(), Logger: log.With("component", "registry")})
	if err != nil {
		return err
	}
	comps := []lifecycle.Component{reg}
	for i := range c.Dispatchers {
		w := counter(fmt.Sprintf("dispatcher-%d", i))
		dst, err := open(w)
		if err != nil {
			return err
		}
		kafka, err := kafkaOf(w)
		if err != nil {
			return err
		}
		d, err := dispatcher.New(dispatcher.Config{Kafka: kafka, Store: dst, Topics: names, GroupID: dispG,
			InstanceID: fmt.Sprintf("bench-dispatcher-%d", i), Registerer: prometheus.NewRegistry(),
			Logger: log.With("component", "dispatcher", "i", i)})
		if err != nil {
			return err
		}
		comps = append(comps, d)
	}
	var transport target.TransportFunc
	if c.RunnerHTTPIdleConns > 0 {
		transport = target.PooledTransport(c.RunnerHTTPIdleConns)
	}
	// The bench's HTTP sinks listen on loopback, which the egress policy
	// refuses by default: every team may reach it here.
	loopback := egress.LoopbackForEveryTeam()
	log.Warn("egress: every team's HTTP targets may reach loopback addresses (the bench's sinks)")
	handlers := map[string]target.Handler{"noop": target.HandlerFunc(func(context.Context, *sundialv1.Run) error { return nil })}
	if c.EffectURL != "" {
		handlers[WorkersHandler] = effectHandler{client: effectHTTPClient(cmp.Or(c.RunnerConcurrency, runner.DefaultConcurrency)), url: c.EffectURL}
	}
	for i := range c.Runners {
		w := counter(fmt.Sprintf("runner-%d", i))
		rst, err := open(w)
		if err != nil {
			return err
		}
		kafka, err := kafkaOf(w)
		if err != nil {
			return err
		}
		rrc := redis.NewClient(&redis.Options{Addr: c.Backends.RedisAddr, PoolSize: 128})
		rrc.AddHook(w.RedisHook())
		run.OnStop(func() { _ = rrc.Close() })
		renq, _, err := enqueuer(rst, w, cluster.Shards)
		if err != nil {
			return err
		}
		// Built as `sundial runner` builds it (package assemble): with
		// checkpoints and team quotas, so the bench measures what ships.
		r, err := assemble.Runner(ctx, runner.Config{ID: fmt.Sprintf("bench-runner-%d", i), Kafka: kafka, Topics: names, Group: runG,
			Handlers:      handlers,
			HTTPTransport: transport, Egress: loopback,
			Concurrency: c.RunnerConcurrency, Registerer: prometheus.NewRegistry(), Logger: log.With("component", "runner", "i", i)},
			assemble.RunnerBackends{Redis: rrc, RedisKeyPrefix: c.Namespace.RedisPrefix, Enqueuer: renq, Checkpoints: rst, Quotas: rst})
		if err != nil {
			return err
		}
		comps = append(comps, r)
		if c.History {
			hw := counter(fmt.Sprintf("history-%d", i))
			hst, err := open(hw)
			if err != nil {
				return err
			}
			hkafka, err := kafkaOf(hw)
			if err != nil {
				return err
			}
			w, err := history.New(history.Config{Kafka: hkafka, Topics: names, Group: histG, History: hst, Logger: log.With("component", "history")})
			if err != nil {
				return err
			}
			comps = append(comps, w)
		}
	}
	return run.StartAll(ctx, comps...)
}

// Work is the backend work each component of the pipeline asked for so
// far, by component (registry, dispatcher-0, runner-0, history-0...), from
// its clients' hooks.
func (p *InProcess) Work(context.Context) (map[string]telemetry.Work, error) {
	out := make(map[string]telemetry.Work, len(p.work))
	for name, w := range p.work {
		out[name] = w.Work()
	}
	return out, nil
}

// Stop stops the components in reverse order, then closes the clients.
// Safe before Start and more than once.
func (p *InProcess) Stop() { p.life.Stop() }

// Processes runs the registry in this process and the dispatchers, runners
// and DAG engines as `sundial dispatcher`, `sundial runner` and `sundial
// dag engine` subprocesses of the binary at Binary, so that one can be
// killed with SIGKILL or its memory read from /proc.
//
// A subprocess that exits on its own (not through Kill or Stop) is an
// exit, recorded in Exits; with Supervise it is started again after
// SuperviseDelay, as a process supervisor would.
//
// Each subprocess serves its Go profiles (--pprof-addr) on a loopback port
// picked when it is first started and kept across restarts (PprofAddr).
type Processes struct {
	cfg    PipelineConfig
	Binary string
	LogDir string
	// InProcessRunners keeps the runners (and their history writers) in
	// this process with the registry: only the dispatchers are
	// subprocesses. Set before Start.
	InProcessRunners bool
	// Supervise restarts a subprocess that exited on its own. Set before
	// Start.
	Supervise bool
	// SuperviseDelay is the wait before such a restart. Default 2s.
	SuperviseDelay time.Duration
	// Now is the clock of the exit records; default time.Now.
	Now func() time.Time

	reg      *InProcess // the registry half
	mu       sync.Mutex
	procs    map[string]*exec.Cmd
	pprof    map[string]string      // --pprof-addr by name
	metrics  map[string]string      // --metrics-addr by name
	pickAddr func() (string, error) // default freeLoopbackAddr; tests replace it
	exits    []ProcessExit
	stopping bool
	quit     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup // one watcher per started subprocess
}

// ProcessExit is a subprocess that ended without being killed or stopped
// by the bench.
type ProcessExit struct {
	Process string    `json:"process"`
	At      time.Time `json:"at"`
	Err     string    `json:"error"`
	// Restarted says whether the supervisor started it again.
	Restarted bool `json:"restarted"`
}

// NewProcesses returns a pipeline that is not started.
func NewProcesses(cfg PipelineConfig, binary, logDir string) *Processes {
	return &Processes{cfg: cfg, Binary: binary, LogDir: logDir, procs: map[string]*exec.Cmd{}, pprof: map[string]string{}, metrics: map[string]string{}, quit: make(chan struct{})}
}

// Exits returns the subprocesses that ended on their own so far.
func (p *Processes) Exits() []ProcessExit {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.exits)
}

// Store is the store of the registry half, open after Start.
func (p *Processes) Store() *cassandra.Store { return p.reg.Store() }

// Describe names how the pipeline runs.
func (p *Processes) Describe() string {
	limit := ""
	if p.cfg.MemoryLimitMiB > 0 {
		limit = fmt.Sprintf(", --memory-limit-mib %d", p.cfg.MemoryLimitMiB)
	}
	if p.InProcessRunners {
		return fmt.Sprintf("dispatchers as processes: registry and %d runner(s) (concurrency %s, history=%v) in the bench process (registry concurrency %s, audit trail and quotas); %d `sundial dispatcher` subprocess(es)%s, logs in %s",
			p.cfg.Runners, orDefault(p.cfg.RunnerConcurrency), p.cfg.History, orDefault(p.cfg.RegistryConcurrency), p.cfg.Dispatchers, limit, p.LogDir)
	}
	return fmt.Sprintf("processes: registry in the bench process (concurrency %s, audit trail and quotas); %d `sundial dispatcher`, %d `sundial runner` (concurrency %s, history=%v) and %d `sundial dag engine` subprocess(es)%s, logs in %s",
		orDefault(p.cfg.RegistryConcurrency), p.cfg.Dispatchers, p.cfg.Runners, orDefault(p.cfg.RunnerConcurrency), p.cfg.History, p.cfg.DagEngines, limit, p.LogDir)
}

// Names lists the subprocesses ("dispatcher-0", "runner-1", ...).
func (p *Processes) Names() []string {
	var out []string
	for i := range p.cfg.Dispatchers {
		out = append(out, "dispatcher-"+strconv.Itoa(i))
	}
	if p.InProcessRunners {
		return out
	}
	for i := range p.cfg.Runners {
		out = append(out, "runner-"+strconv.Itoa(i))
	}
	for i := range p.cfg.DagEngines {
		out = append(out, "dagengine-"+strconv.Itoa(i))
	}
	return out
}

// PID returns the process id of the running subprocess name.
func (p *Processes) PID(name string) (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cmd := p.procs[name]
	if cmd == nil || cmd.Process == nil {
		return 0, false
	}
	return cmd.Process.Pid, true
}

// Work is the backend work each component asked for so far: the registry
// half's (and the in-process runners') from their clients' hooks, each
// subprocess's from the same counters on its /metrics
// (sundial_backend_requests_total). A subprocess that restarted counts from
// its restart.
func (p *Processes) Work(ctx context.Context) (map[string]telemetry.Work, error) {
	out, _ := p.reg.Work(ctx)
	var errs []error
	for _, name := range p.Names() {
		p.mu.Lock()
		addr, running := p.metrics[name], p.procs[name] != nil
		p.mu.Unlock()
		if !running {
			continue
		}
		w, err := scrapeWork(ctx, "http://"+addr+"/metrics")
		if err != nil {
			errs = append(errs, fmt.Errorf("work of %s: %w", name, err))
			continue
		}
		out[name] = w
	}
	return out, errors.Join(errs...)
}

// PprofAddr returns the address (host:port) on which the running
// subprocess name serves /debug/pprof/.
func (p *Processes) PprofAddr(name string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	addr := p.pprof[name]
	return addr, addr != "" && p.procs[name] != nil
}

// freeLoopbackAddr picks a free TCP port on 127.0.0.1. Another process may
// take it before the subprocess listens on it; the subprocess then fails to
// start and says so.
func freeLoopbackAddr() (string, error) {
	// Listen and close at once: there is nothing to cancel, and Restart
	// has no context.
	ln, err := net.Listen("tcp", "127.0.0.1:0") //nolint:noctx // see above
	if err != nil {
		return "", fmt.Errorf("pick a loopback port: %w", err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr, nil
}

// unusedAddr picks a free loopback address that no subprocess has been
// given yet. freeLoopbackAddr closes the port it found, so the system may
// hand the same port out again; two subprocesses given one address would
// find each other's server (a runner's /metrics answered by a
// dispatcher's pprof). Called with p.mu held.
func (p *Processes) unusedAddr() (string, error) {
	pick := p.pickAddr
	if pick == nil {
		pick = freeLoopbackAddr
	}
	given := func(addr string) bool {
		for _, m := range []map[string]string{p.pprof, p.metrics} {
			for _, a := range m {
				if a == addr {
					return true
				}
			}
		}
		return false
	}
	for range 20 {
		addr, err := pick()
		if err != nil {
			return "", err
		}
		if !given(addr) {
			return addr, nil
		}
	}
	return "", errors.New("pick a loopback port: every pick was already given to another subprocess")
}

func (p *Processes) args(name string) []string {
	c := p.cfg
	_, dispG, runG, _ := c.groups()
	common := []string{
		"--pprof-addr", p.pprof[name],
		"--metrics-addr", p.metrics[name],
		"--kafka-brokers", strings.Join(c.Backends.Brokers, ","),
		"--cassandra-hosts", strings.Join(c.Backends.CassandraHosts, ","),
		"--keyspace", c.Namespace.Keyspace,
		"--topic-prefix", c.Namespace.TopicPrefix,
		// Info, into the process's own log file: what a process logs at
		// info is its life (start, partitions and shards taken and given
		// up, lease takeovers), not each run, so a chaos kill's restart
		// can be read from the logs at no cost per run.
		"--log-level", "info",
	}
	if c.MemoryLimitMiB > 0 {
		common = append(common, "--memory-limit-mib", strconv.Itoa(c.MemoryLimitMiB))
	}
	// Every process is a static member of its groups under its bench
	// name, as the chart's pods are under their pod names, so a process
	// the chaos run kills and restarts gets its partitions back at once
	// (docs/architecture.md, "Failover").
	kind, _, _ := strings.Cut(name, "-")
	switch kind {
	case "dispatcher":
		return append([]string{"dispatcher", "--group-id", dispG, "--instance-id", "bench-" + name, "--group-instance-id", "bench-" + name}, common...)
	case "dagengine":
		evG, defG := c.dagGroups()
		return append([]string{"dag", "engine", "--group-id", evG, "--definitions-group-id", defG, "--group-instance-id", "bench-" + name,
			"--jobs-shared-topic=true"}, common...)
	}
	// The bench's HTTP sinks listen on loopback, which a runner refuses by
	// default: every team may reach it here (the runner logs it at start).
	args := append([]string{"runner", "--group-id", runG, "--runner-id", "bench-" + name, "--group-instance-id", "bench-" + name, "--redis-addr", c.Backends.RedisAddr,
		"--history=" + strconv.FormatBool(c.History), "--egress-allow", "127.0.0.0/8,::1"}, common...)
	if c.RunnerConcurrency > 0 {
		args = append(args, "--concurrency", strconv.Itoa(c.RunnerConcurrency))
	}
	return args
}

// Start starts the registry and every subprocess.
func (p *Processes) Start(ctx context.Context) error {
	if err := os.MkdirAll(p.LogDir, 0o755); err != nil {
		return err
	}
	regOnly := p.cfg
	regOnly.Dispatchers = 0
	if !p.InProcessRunners {
		regOnly.Runners = 0
	}
	p.reg = NewInProcess(regOnly)
	if err := p.reg.Start(ctx); err != nil {
		return err
	}
	for _, n := range p.Names() {
		if err := p.start(n); err != nil {
			p.Stop()
			return err
		}
	}
	return nil
}

func (p *Processes) start(name string) error {
	f, err := os.OpenFile(filepath.Join(p.LogDir, name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopping {
		_ = f.Close()
		return fmt.Errorf("start %s: the pipeline is stopping", name)
	}
	for _, m := range []map[string]string{p.pprof, p.metrics} {
		if m[name] != "" {
			continue
		}
		addr, err := p.unusedAddr()
		if err != nil {
			_ = f.Close()
			return fmt.Errorf("start %s: %w", name, err)
		}
		m[name] = addr
	}
	// The process outlives any one context: Kill and Stop end it.
	cmd := exec.Command(p.Binary, p.args(name)...) //nolint:noctx // see above
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	p.procs[name] = cmd
	p.wg.Add(1)
	go p.watch(name, cmd, f)
	return nil
}

// watch waits for the subprocess to end. One that ended while it was
// still the registered process of its name ended on its own (Kill and Stop
// unregister it first): it is recorded and, with Supervise, started again.
func (p *Processes) watch(name string, cmd *exec.Cmd, f *os.File) {
	defer p.wg.Done()
	err := cmd.Wait()
	_ = f.Close()
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	p.mu.Lock()
	own := p.procs[name] == cmd && !p.stopping
	if !own {
		p.mu.Unlock()
		return
	}
	delete(p.procs, name)
	p.exits = append(p.exits, ProcessExit{Process: name, At: now().UTC(), Err: fmt.Sprint(err), Restarted: p.Supervise})
	p.mu.Unlock()
	if !p.Supervise {
		return
	}
	t := time.NewTimer(cmp.Or(p.SuperviseDelay, 2*time.Second))
	defer t.Stop()
	select {
	case <-p.quit:
		return
	case <-t.C:
	}
	if err := p.start(name); err != nil {
		p.mu.Lock()
		p.exits = append(p.exits, ProcessExit{Process: name, At: now().UTC(), Err: "supervisor restart: " + err.Error()})
		p.mu.Unlock()
	}
}

// Kill sends SIGKILL to the subprocess name.
func (p *Processes) Kill(name string) error {
	p.mu.Lock()
	cmd := p.procs[name]
	delete(p.procs, name)
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return fmt.Errorf("kill %s: not running", name)
	}
	return cmd.Process.Signal(syscall.SIGKILL)
}

// Restart starts the subprocess name again.
func (p *Processes) Restart(name string) error { return p.start(name) }

// Running says whether the subprocess name is running (started and not
// known to have ended).
func (p *Processes) Running(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.procs[name] != nil
}

// Stop sends SIGTERM to every subprocess, waits up to 30s for them (then
// kills them), and stops the registry. Safe more than once.
func (p *Processes) Stop() {
	p.mu.Lock()
	p.stopping = true
	procs := p.procs
	p.procs = map[string]*exec.Cmd{}
	p.mu.Unlock()
	p.stopOnce.Do(func() { close(p.quit) })
	var wg sync.WaitGroup
	for _, cmd := range procs {
		wg.Go(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			deadline := time.Now().Add(30 * time.Second)
			for time.Now().Before(deadline) {
				if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
					return
				}
				time.Sleep(100 * time.Millisecond) //nolint:forbidigo // Stop has no context; the loop is bounded by its 30 s deadline
			}
			_ = cmd.Process.Kill()
		})
	}
	wg.Wait()
	p.wg.Wait()
	if p.reg != nil {
		p.reg.Stop()
	}
}

// errNoBinary is returned when the sundial binary cannot be built.
var errNoBinary = errors.New("bench: no sundial binary")

// BuildBinary builds ./cmd/sundial into dir and returns its path.
func BuildBinary(ctx context.Context, dir string) (string, error) {
	out := filepath.Join(dir, "sundial")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/sundial")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w: go build ./cmd/sundial: %w\n%s", errNoBinary, err, b)
	}
	return out, nil
}

func orDefault(n int) string {
	if n == 0 {
		return "default"
	}
	return strconv.Itoa(n)
}
