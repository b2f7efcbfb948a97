package bench

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sundialhq/sundial/internal/configfile"
	"github.com/sundialhq/sundial/internal/lifecycle"
	"github.com/sundialhq/sundial/loadgen"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner"
	"github.com/sundialhq/sundial/runner/target"
	"github.com/sundialhq/sundial/worker"
)

// WorkersHandler is the handler of the workers scenario's jobs: it applies
// the run's effect at the counting downstream (loadgen.PostEffect). The
// stock runner has it compiled in for the first system; the SDK worker
// processes register it for the second.
const WorkersHandler = "bench-effect"

// workersTeam is the owner team of the workload's jobs (loadgen's
// default), whose token the SDK workers hold.
const workersTeam = "loadgen"

// effectHTTPClient is the client a handler of the workers scenario posts
// its effects with: as many idle connections to the downstream as
// attempts in flight, so that none is opened per run.
func effectHTTPClient(conns int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = max(conns, 2)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// effectHandler is WorkersHandler compiled into a runner.
type effectHandler struct {
	client *http.Client
	url    string
}

func (h effectHandler) Handle(ctx context.Context, run *sundialv1.Run) error {
	return h.HandleAttempt(ctx, target.Request{Run: run})
}

func (h effectHandler) HandleAttempt(ctx context.Context, req target.Request) error {
	run := req.Run
	return loadgen.PostEffect(ctx, h.client, h.url, loadgen.Effect{RunID: run.GetRunId(), JobID: run.GetJobId(),
		Attempt: run.GetAttempt(), FencingToken: req.FencingToken})
}

// RunWorker is `sundial bench worker`: a team's worker of the SDK (package
// worker) that registers WorkersHandler, posting each run's effect to the
// counting downstream at --effect-url, until ctx ends. It is configured
// as any team's worker is (worker.Flags: --api-url, --api-token, ...,
// or their SUNDIAL_* variables): it holds the API's address and the
// team's token, nothing else. Its logs (warnings and above) go to logs.
func RunWorker(ctx context.Context, args []string, logs io.Writer) error {
	fs := flag.NewFlagSet("bench worker", flag.ContinueOnError)
	fs.SetOutput(logs)
	effectURL := fs.String("effect-url", "", "the counting downstream's URL, where each run's effect is applied")
	load := worker.Flags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // the flag set printed its usage, as asked
		}
		return fmt.Errorf("bench worker: %w", err)
	}
	if *effectURL == "" {
		return errors.New("bench worker: --effect-url: is required")
	}
	cfg, err := load()
	if err != nil {
		return fmt.Errorf("bench worker: %w", err)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	w, err := worker.New(cfg)
	if err != nil {
		return fmt.Errorf("bench worker: %w", err)
	}
	client := effectHTTPClient(cfg.Concurrency)
	w.Handle(WorkersHandler, func(ctx context.Context, r *worker.Run) error {
		return loadgen.PostEffect(ctx, client, *effectURL, loadgen.Effect{RunID: r.ID, JobID: r.JobID, Attempt: r.Attempt, FencingToken: r.FencingToken})
	})
	return w.Run(ctx)
}

// Workers is the SDK side of the workers scenario: the worker gateway,
// hosted by `sundial api --worker-gateway` (a child process of Binary, on
// loopback ports of its own), and Count `sundial bench worker` child
// processes, each a team worker of Slots slots given only the API's
// address and the team's token (through the environment, as a team's
// deployment gives them). The stock runner of the pipeline, which does not
// have WorkersHandler, hands each run to the gateway, whose workers execute
// it. Start returns once every worker polls the gateway.
type Workers struct {
	// Binary is the sundial binary. Required.
	Binary string
	// Backends and Namespace are the run's: the gateway's runner leases
	// in the namespace's Redis prefix and reads its topics.
	Backends  Backends
	Namespace Namespace
	// Count workers of Slots slots each. Both at least 1.
	Count, Slots int
	// EffectURL is the counting downstream's URL. Required.
	EffectURL string
	// LogDir receives gateway.log and worker-<i>.log.
	LogDir string

	life lifecycle.Lifecycle
	mu   sync.Mutex
	pids map[string]int // running children by name
}

// Describe says how the SDK side runs.
func (w *Workers) Describe() string {
	return fmt.Sprintf("the worker gateway in a `sundial api --worker-gateway` subprocess and %d `sundial bench worker` subprocess(es) of %d slots each (package worker with the API's address and team %s's token only), logs in %s",
		w.Count, w.Slots, workersTeam, w.LogDir)
}

// Names lists the children: "gateway", "worker-0", ...
func (w *Workers) Names() []string {
	out := []string{"gateway"}
	for i := range w.Count {
		out = append(out, "worker-"+strconv.Itoa(i))
	}
	return out
}

// PID returns the process id of the running child name.
func (w *Workers) PID(name string) (int, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	pid, ok := w.pids[name]
	return pid, ok
}

// Start starts the gateway, then the workers, and waits until the gateway
// counts every worker as connected. On error, what was started is stopped.
func (w *Workers) Start(ctx context.Context) error { return w.life.Start(ctx, w.start) }

// Stop stops the workers (each drains its attempts), then the gateway.
// Safe before Start and more than once.
func (w *Workers) Stop() { w.life.Stop() }

func (w *Workers) start(ctx context.Context, run *lifecycle.Run) error {
	if w.Binary == "" || w.EffectURL == "" || w.Count < 1 || w.Slots < 1 {
		return fmt.Errorf("workers: binary %q, effect url %q, count %d, slots %d: need a binary, a URL and at least one worker of one slot", w.Binary, w.EffectURL, w.Count, w.Slots)
	}
	if err := os.MkdirAll(w.LogDir, 0o755); err != nil {
		return fmt.Errorf("workers: %w", err)
	}
	w.mu.Lock()
	w.pids = map[string]int{}
	w.mu.Unlock()
	addr, err := freeLoopbackAddr()
	if err != nil {
		return fmt.Errorf("workers: %w", err)
	}
	metricsAddr, err := freeLoopbackAddr()
	if err != nil {
		return fmt.Errorf("workers: %w", err)
	}
	// A secret of this run only: the API is on loopback and lives as long
	// as the run.
	secret := "bench-" + rand.Text()
	gw, err := w.spawn(run, "gateway", []string{"api", "--worker-gateway",
		"--listen", addr, "--metrics-addr", metricsAddr,
		"--api-static-token", workersTeam + ":operator:" + secret,
		"--kafka-brokers", strings.Join(w.Backends.Brokers, ","),
		"--cassandra-hosts", strings.Join(w.Backends.CassandraHosts, ","),
		"--keyspace", w.Namespace.Keyspace,
		"--topic-prefix", w.Namespace.TopicPrefix,
		"--redis-addr", w.Backends.RedisAddr,
		"--redis-key-prefix", w.Namespace.RedisPrefix,
		"--shutdown-grace", "1s",
		"--log-level", "warn"}, nil)
	if err != nil {
		return err
	}
	if err := waitListening(ctx, addr, gw.exited, gw.status); err != nil {
		return fmt.Errorf("workers: the gateway (log %s): %w", gw.log, err)
	}
	var workers []*child
	for i := range w.Count {
		// The worker's settings, as a team's deployment gives them; none
		// of the bench's own SUNDIAL_* variables reaches it.
		env := []string{
			configfile.EnvName(worker.KeyAPIURL) + "=http://" + addr,
			configfile.EnvName(worker.KeyAPIToken) + "=" + secret,
			configfile.EnvName(worker.KeyWorkerID) + "=bench-worker-" + strconv.Itoa(i),
			configfile.EnvName(worker.KeyConcurrency) + "=" + strconv.Itoa(w.Slots),
		}
		c, err := w.spawn(run, "worker-"+strconv.Itoa(i), []string{"bench", "worker", "--effect-url", w.EffectURL}, env)
		if err != nil {
			return err
		}
		workers = append(workers, c)
	}
	readyCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	url := "http://" + metricsAddr + "/metrics"
	for {
		n, err := scrapeGatewayWorkers(readyCtx, url)
		if err == nil && n >= w.Count {
			return nil
		}
		for _, c := range append([]*child{gw}, workers...) {
			select {
			case <-c.exited:
				return fmt.Errorf("workers: %s exited before the workers were connected (log %s): %w", c.name, c.log, c.status())
			default:
			}
		}
		if !sleepUntil(readyCtx, time.Now().Add(200*time.Millisecond)) {
			if err != nil {
				return fmt.Errorf("workers: the gateway's metrics after 2m (logs in %s): %w", w.LogDir, err)
			}
			return fmt.Errorf("workers: %d of %d workers connected to the gateway after 2m (logs in %s)", n, w.Count, w.LogDir)
		}
	}
}

// child is one running subprocess of Workers.
type child struct {
	name, log string
	exited    chan struct{} // closed once it exited; err is then its status
	err       error
}

func (c *child) status() error { return c.err }

// spawn starts `Binary args...` as the child name, its output in
// LogDir/name.log, with env added to the environment (an env that is not
// nil replaces the SUNDIAL_* variables of the bench's). run's stop ends it
// with SIGTERM, then SIGKILL after 30 s.
func (w *Workers) spawn(run *lifecycle.Run, name string, args, env []string) (*child, error) {
	path := filepath.Join(w.LogDir, name+".log")
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("workers: %w", err)
	}
	// The process lives from Start to Stop, not for one context.
	cmd := exec.Command(w.Binary, args...) //nolint:noctx // see above
	cmd.Stdout, cmd.Stderr = f, f
	if env != nil {
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "SUNDIAL_") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, env...)
	}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("workers: start %s: %w", name, err)
	}
	c := &child{name: name, log: path, exited: make(chan struct{})}
	go func() {
		defer close(c.exited)
		c.err = cmd.Wait()
		_ = f.Close()
	}()
	w.mu.Lock()
	w.pids[name] = cmd.Process.Pid
	w.mu.Unlock()
	run.OnStop(func() {
		defer func() {
			w.mu.Lock()
			delete(w.pids, name)
			w.mu.Unlock()
		}()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		t := time.NewTimer(30 * time.Second)
		defer t.Stop()
		select {
		case <-c.exited:
		case <-t.C:
			_ = cmd.Process.Kill()
			<-c.exited
		}
	})
	return c, nil
}

// scrapeGatewayWorkers reads the gateway's metrics at url and returns the
// workers it counts as connected.
func scrapeGatewayWorkers(ctx context.Context, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("metrics: %s", resp.Status)
	}
	return gatewayWorkers(resp.Body)
}

// gatewayWorkers sums the samples of sundial_gateway_workers (one per
// team) of a Prometheus text exposition.
func gatewayWorkers(r io.Reader) (int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	n := 0.0
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, "sundial_gateway_workers")
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		if i := strings.LastIndexByte(rest, '}'); i >= 0 {
			rest = rest[i+1:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, fmt.Errorf("metrics: %q: no value", line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, fmt.Errorf("metrics: %q: %w", line, err)
		}
		n += v
	}
	return int(n), sc.Err()
}

// workersPipeline is the pipeline of a workers run's SDK system: the
// pipeline (whose runners lack WorkersHandler) and the SDK workers.
type workersPipeline struct {
	pipeline
	workers *Workers
}

func (p *workersPipeline) Start(ctx context.Context) error {
	if err := p.pipeline.Start(ctx); err != nil {
		return err
	}
	if err := p.workers.Start(ctx); err != nil {
		p.pipeline.Stop()
		return err
	}
	return nil
}

// Stop stops the workers first: each drains its attempts while the
// gateway and the runners still take their outcomes.
func (p *workersPipeline) Stop() {
	p.workers.Stop()
	p.pipeline.Stop()
}

func (p *workersPipeline) Describe() string {
	return p.pipeline.Describe() + "; " + p.workers.Describe()
}

// workersScenario: the same handler workload executed by the stock runner
// (WorkersHandler compiled in), then by SDK worker processes through the
// worker gateway, each in a namespace of its own, side by side.
type workersScenario struct{ baseScenario }

func (workersScenario) sizes(Config) (int, float64, time.Duration) {
	return 30_000, 500, 2 * time.Minute
}

func (workersScenario) defaults(c *Config) {
	c.Workers = cmp.Or(c.Workers, 2)
	if c.WorkerSlots == 0 && c.Workers > 0 {
		total := cmp.Or(c.Runners, 1) * cmp.Or(c.RunnerConcurrency, runner.DefaultConcurrency)
		c.WorkerSlots = max(1, (total+c.Workers-1)/c.Workers)
	}
}

func (workersScenario) validate(c Config, bad func(string, ...any)) {
	if c.Target != "http" {
		bad("target %q: the workers scenario's runs are handler runs (%s) whose effects the counting downstream counts; leave --target at http", c.Target, WorkersHandler)
	}
	if c.Workers < 1 || c.WorkerSlots < 1 {
		bad("workers %d of %d slots: the SDK system needs at least one worker of one slot", c.Workers, c.WorkerSlots)
	}
}

func (workersScenario) describe(c Config) string {
	return fmt.Sprintf("; the handler %s compiled into the stock runner, then run by %d SDK worker processes of %d slots each through the worker gateway, each system in a namespace of its own",
		WorkersHandler, c.Workers, c.WorkerSlots)
}

// prepare builds the sundial binary once, for the gateway and the workers
// (and the dispatchers' subprocesses of both systems).
func (workersScenario) prepare(ctx context.Context, b *Bench, cfg *Config, _ time.Time) error {
	if cfg.Binary != "" {
		return nil
	}
	tmp, err := os.MkdirTemp("", "sundial-bench-")
	if err != nil {
		return err
	}
	b.say("building the sundial binary once, for both systems")
	cfg.Binary, err = BuildBinary(ctx, tmp)
	return err
}

// shape: every job's target is WorkersHandler, whatever --target says
// (validate refuses noop).
func (workersScenario) shape(w *loadgen.Workload) { w.Target = loadgen.Target{Handler: WorkersHandler} }

// pipeline: the SDK system's runners lack WorkersHandler, so that they hand
// every run to the gateway.
func (workersScenario) pipeline(c Config, pc *PipelineConfig) bool {
	if c.viaWorkers {
		pc.EffectURL = ""
	}
	return false
}

func (workersScenario) measure(ctx context.Context, b *Bench, cfg *Config, ns Namespace, _ Baselines, _ *Report) (System, WorkloadInfo, error) {
	b.say("workers: the stock runner first, with %s compiled in", WorkersHandler)
	sys, wl, err := b.runSundial(ctx, cfg, ns)
	sys.Name = "stock runner"
	return sys, wl, err
}

// peers runs the same workload through the SDK workers, in a namespace of
// its own (Namespace.Step), so that nothing the stock run left runs in it.
func (workersScenario) peers(ctx context.Context, b *Bench, cfg *Config, ns Namespace) ([]System, error) {
	sc := *cfg
	sc.viaWorkers = true
	sns := ns.Step(1)
	b.say("workers: the same workload through %d SDK worker processes of %d slots each, in namespace %s", cfg.Workers, cfg.WorkerSlots, sns.ID)
	if err := b.stepNamespace(ctx, cfg, sns); err != nil {
		return nil, err
	}
	if !cfg.Keep {
		defer b.teardown(ctx, sns)
	}
	sys, _, err := b.runSundial(ctx, &sc, sns)
	if err != nil {
		return nil, fmt.Errorf("workers: the SDK system: %w", err)
	}
	sys.Name = "sdk workers"
	sys.Notes = append(sys.Notes, "pipeline: "+sc.Pipeline,
		"A run starts (its trigger latency, its runs/s) when the gateway's runner holds its lease and queues the attempt for a worker, as the stock runner's starts when it holds the lease and calls the handler; the worker's Poll takes it after that, and its effect is the worker's.")
	return []System{sys}, nil
}

func (workersScenario) targets(_ Config, r *Report, s System, add addTarget) {
	for _, sys := range r.Systems {
		noLoss := sys.Counts.Lost == 0 && sys.Counts.DuplicateExecutions == 0 && sys.Effects.DuplicateEffects == 0
		add(sys.Name+": lost + duplicate executions + duplicate effects", "0", float64(sys.Counts.Lost+sys.Counts.DuplicateExecutions+sys.Effects.DuplicateEffects), noLoss)
	}
	if len(r.Systems) < 2 {
		return
	}
	w := r.Systems[1]
	ratio := safeDiv(w.SustainedPerSec, s.SustainedPerSec)
	add(fmt.Sprintf("%s runs/s / %s runs/s (%.0f / %.0f)", w.Name, s.Name, w.SustainedPerSec, s.SustainedPerSec), "≥ 0.50", ratio, s.SustainedPerSec > 0 && ratio >= 0.5)
	add(fmt.Sprintf("%s trigger p95 / %s trigger p95 (%.0f / %.0f ms)", w.Name, s.Name, w.Trigger.P95Ms, s.Trigger.P95Ms), "reported",
		safeDiv(w.Trigger.P95Ms, s.Trigger.P95Ms), true)
	if s.CPUPerRun != nil && w.CPUPerRun != nil {
		add(fmt.Sprintf("%s machine CPU per run / %s's (%.2f / %.2f ms)", w.Name, s.Name, w.CPUPerRun.MachineMs, s.CPUPerRun.MachineMs), "reported",
			safeDiv(w.CPUPerRun.MachineMs, s.CPUPerRun.MachineMs), true)
		add(fmt.Sprintf("%s Sundial CPU per run / %s's (%.2f / %.2f ms)", w.Name, s.Name, w.CPUPerRun.SundialMs, s.CPUPerRun.SundialMs), "reported",
			safeDiv(w.CPUPerRun.SundialMs, s.CPUPerRun.SundialMs), true)
	}
}

func (workersScenario) plots() []reportPlot {
	return []reportPlot{{File: "workers-runs-per-second.png", About: "runs started in each second since the start of the window, by each system", Draw: PlotRunsPerSecond}}
}
