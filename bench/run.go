package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/client"
	"github.com/sundialhq/sundial/internal/backoff"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/leasing"
	"github.com/sundialhq/sundial/loadgen"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store/cassandra"
)

// Bench runs one scenario.
type Bench struct {
	Config   Config
	Backends Backends
	// Progress receives the phase and progress lines.
	Progress io.Writer
	Logger   *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
	// CPUProfile, if set, is where a CPU profile of the bench process (with
	// an in-process pipeline: the dispatchers and runners too) over the
	// measured window is written.
	CPUProfile string
	// HogCommand starts the CPU hog of Config.Noisy: a process that runs
	// RunHog (`sundial bench hog`). Required when Noisy is set.
	HogCommand []string
	// APICommand starts the API server of Config.APIWatch: the sundial
	// binary and "api" (`sundial api`). Required when APIWatch is set.
	APICommand []string

	hog     *Hog      // the running CPU hog of Config.Noisy, for the CPU table
	api     *APIWatch // the running API watch of Config.APIWatch, for the CPU table
	workers *Workers  // the SDK side of a workers run while it runs, for the CPU table
}

func (b *Bench) say(format string, args ...any) {
	if b.Progress != nil {
		_, _ = fmt.Fprintf(b.Progress, "bench: "+format+"\n", args...)
	}
}

// Run runs the scenario and writes its report; it returns the results
// folder.
func (b *Bench) Run(ctx context.Context) (string, *Report, error) {
	if b.Now == nil {
		b.Now = time.Now
	}
	if b.Logger == nil {
		b.Logger = slog.New(slog.DiscardHandler)
	}
	cfg := b.Config.WithDefaults()
	if err := errors.Join(cfg.Validate(), b.Backends.Validate()); err != nil {
		return "", nil, err
	}
	if cfg.Noisy && len(b.HogCommand) == 0 {
		return "", nil, errors.New("bench: noisy: HogCommand is required to start the CPU hog")
	}
	if cfg.APIWatch && len(b.APICommand) == 0 {
		return "", nil, errors.New("bench: api watch: APICommand is required to start the API server")
	}
	start := b.Now()
	sc := scenarioNamed(cfg.Scenario)
	if err := sc.prepare(ctx, b, &cfg, start); err != nil {
		return "", nil, err
	}
	rep := &Report{Scenario: cfg.Scenario, StartedAt: start.UTC(), Commit: DescribeCommit(ctx), Machine: DescribeMachine(),
		Backends: DescribeBackends(ctx, b.Backends)}
	b.say("%s on Kafka %s, Cassandra %s, Redis %s; commit %s", cfg.Scenario, rep.Backends.Kafka, rep.Backends.Cassandra, rep.Backends.Redis, rep.Commit.Hash)

	ns := NewNamespace(cfg.Scenario, start)
	setupCtx, cancel := context.WithTimeout(ctx, 8*time.Minute)
	err := ns.Setup(setupCtx, b.Backends, cfg.Shards)
	cancel()
	if !cfg.Keep {
		defer b.teardown(ctx, ns)
	}
	if err != nil {
		return "", nil, err
	}
	b.say("namespace %s: topics %s*, keyspace %s, redis %s*", ns.ID, ns.TopicPrefix, ns.Keyspace, ns.RedisPrefix)

	plan, err := b.plan(cfg, ns.ID, "http://127.0.0.1:1/effect")
	if err != nil {
		return "", nil, err
	}
	perRun := perRunWork(cfg)
	bl, err := b.baselines(ctx, cfg, ns, plan, perRun)
	if err != nil {
		return "", nil, err
	}
	rep.Baselines = bl

	var hog *Hog
	if cfg.Noisy {
		hog = &Hog{Command: b.HogCommand}
		if err := hog.Start(ctx); err != nil {
			return "", nil, err
		}
		defer hog.Stop()
		b.hog = hog
		rep.Noisy = fmt.Sprintf("a CPU hog (process %d: one goroutine locked to its thread, busy-looping) took one core from the end of the baselines to the end of the run; the baselines were measured without it", hog.PID())
		b.say("noisy: CPU hog started, process %d", hog.PID())
	}

	var watch *APIWatch
	if cfg.APIWatch {
		log, err := os.CreateTemp("", "sundial-bench-api-*.log")
		if err != nil {
			return "", nil, fmt.Errorf("api watch: %w", err)
		}
		defer func() { _ = log.Close() }()
		watch = &APIWatch{Command: b.APICommand, Backends: b.Backends, Keyspace: ns.Keyspace, Topics: ns.Names(), Log: log}
		if err := watch.Start(ctx); err != nil {
			return "", nil, err
		}
		defer watch.Stop()
		b.api = watch
		pid, _ := watch.PID()
		b.say("api watch: the API server (process %d, log %s) streams WatchRuns of namespace %s to a client", pid, log.Name(), ns.ID)
	}

	sys, wl, err := sc.measure(ctx, b, &cfg, ns, bl, rep)
	if err != nil {
		return "", nil, err
	}
	rep.Workload = wl
	if watch != nil {
		watch.Stop()
		st := watch.Stats(wl.WindowFrom, wl.WindowTo)
		rep.APIWatch = &st
		b.say("api watch: %d messages received, %d in the window", st.Messages, st.InWindow)
	}
	sys.fractions(bl)
	rep.Systems = append(rep.Systems, sys)

	peers, err := sc.peers(ctx, b, &cfg, ns)
	if err != nil {
		return "", nil, err
	}
	for _, peer := range peers {
		peer.fractions(bl)
		rep.Systems = append(rep.Systems, peer)
	}
	rep.Config = cfg
	rep.Targets = targets(cfg, rep)
	rep.Notes = append(rep.Notes,
		"Trigger latency: the first start of attempt 1 (started_time of STARTED, or of the outcome that carries the start of a run shorter than the runner's StartedDelay) minus the attempt's due time, for runs due in the window; dispatch latency: the run record's LogAppendTime on the runs topic minus the due time.",
		"Lost: runs the workload's own arithmetic makes due in the window that never started by the end of the drain. Duplicate executions: runs with two or more executions (fencing token, runner) of one attempt. Duplicate effects: idempotency keys the counting downstream applied more than once.",
		fmt.Sprintf("The counting downstream honours the idempotency key (the run id): applying an effect takes %s; a key already applied is answered as a replay and counted as a redelivery, not applied again; a key that arrives while another request is still applying it is applied again, a duplicate effect (two executions of one run at once, which leases and fencing must prevent).", cfg.EffectDuration))
	if hog != nil {
		if exited, err := hog.Exited(); exited {
			rep.Noisy += fmt.Sprintf("; it exited before the end of the run (%v), so part of the run was not noisy", err)
		}
	}
	rep.FinishedAt = b.Now().UTC()
	dir := filepath.Join(cfg.ResultsDir, start.UTC().Format("20060102-150405")+"-"+cfg.Scenario)
	if err := rep.Write(dir); err != nil {
		return "", rep, err
	}
	return dir, rep, nil
}

// rates sets how fast the system ran the window [from, to): for a herd
// the drain time and rate (when nothing was lost) and the most runs started
// in one second, else the runs of the window that started during it, per
// second. starts are the window's runs' first starts, unix ms, in order.
func (s *System) rates(plan *loadgen.Plan, counts loadgen.Counts, starts []int64, from, to time.Time) {
	if plan.Herd() {
		s.HerdPeakStartsPerSec = peakPerSecond(starts)
		if counts.Lost == 0 && counts.Expected > 0 {
			// The latest start's lateness, counted from the herd's instant
			// (a splayed run's latency counts from its splayed instant).
			s.HerdDrainSeconds = s.Trigger.MaxMs / 1000
			if plan.Splay > 0 && len(starts) > 0 {
				s.HerdDrainSeconds = float64(starts[len(starts)-1]-plan.HerdAt.UnixMilli()) / 1000
			}
			s.HerdDrainPerSec = safeDiv(float64(counts.Expected), s.HerdDrainSeconds)
		}
		return
	}
	s.SustainedPerSec = float64(counts.StartedDuringWindow) / to.Sub(from).Seconds()
}

// fractions sets the system's rate as a fraction of B and of L: the
// sustained triggers/s, or for a herd the drain rate.
func (s *System) fractions(bl Baselines) {
	rate := s.SustainedPerSec
	if s.HerdDrainPerSec > 0 {
		rate = s.HerdDrainPerSec
	}
	s.FractionOfB = safeDiv(rate, bl.B)
	s.FractionOfL = safeDiv(rate, bl.L)
	if s.CPU != nil {
		c := cpuPerRun(*s.CPU, rate)
		s.CPUPerRun = &c
	}
}

// pipelineSettle is how long the bench waits after starting the pipeline
// before it registers the workload: the dispatcher subprocesses' start and
// their jobs feeds' snapshot allowance (5 s), with room to spare.
const pipelineSettle = 10 * time.Second

// herdWatch is how long after a herd's due time its CPU is sampled and its
// processes profiled.
const herdWatch = 30 * time.Second

func safeDiv(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// plan builds the workload of a scenario with the job id prefix prefix.
func (b *Bench) plan(cfg Config, prefix, url string) (*loadgen.Plan, error) {
	w := loadgen.Workload{Prefix: prefix, Jobs: cfg.Jobs, Rate: cfg.Rate, Duration: cfg.Duration, Mix: cfg.Mix, Splay: cfg.Splay,
		PayloadBytes: cfg.PayloadBytes, Start: b.Now().Add(cfg.Lead)}
	if cfg.Target == "noop" {
		w.Target.Handler = "noop"
	} else {
		w.Target.URL = url
	}
	scenarioNamed(cfg.Scenario).shape(&w)
	return loadgen.NewPlan(w)
}

// perRunWork counts the backend work of one successful run from the code
// paths (TestBackendWorkPerRun counts it from the clients' hooks, and every
// run's report has the counted figures by component): the dispatcher
// stores the next occurrence (PutDue, one row, in a batch shared with the
// firings of 50ms) after producing the run record and its ENQUEUED event,
// and reads nothing (the entry's job snapshot, vouched for by the jobs
// feed, or a definition the bucket read loaded ahead); the runner acquires
// the lease (EVALSHA acquire), emits a SUCCEEDED event that carries the
// start (STARTED is held back for runner.Config.StartedDelay and dropped
// for a run that ends sooner, as the bench's do) and
// completes the lease (EVALSHA complete, which sets the dedupe mark); the
// history writer coalesces the events of an attempt read in one poll into
// one runs row and its runs_by_time index row (RecordRuns). A run shorter
// than a third of the lease TTL is never renewed. A herd is of one-off
// jobs, whose firings have no next occurrence to store.
func perRunWork(cfg Config) PerRun {
	p := PerRun{LeaseCalls: 2, CassandraWrites: 1, KafkaRecords: 3,
		Explanation: "dispatcher: PutDue(next occurrence) + run record + ENQUEUED event, no read; runner: acquire + complete EVALSHA, SUCCEEDED event carrying the start (STARTED elided)"}
	scenarioNamed(cfg.Scenario).perRun(&p)
	if cfg.History {
		p.CassandraWrites += 2
		p.Explanation += "; history writer: one runs row and its runs_by_time row for ENQUEUED and SUCCEEDED (coalesced)"
	}
	return p
}

// runRecordSize is the size of a run record of the plan's first job, as
// the dispatcher writes it (the K baseline's payload).
func runRecordSize(plan *loadgen.Plan) int {
	spec := plan.Spec(0)
	now := time.Now()
	run := &sundialv1.Run{
		RunId: spec.GetId() + "@1767148200000", JobId: spec.GetId(), DueTime: timestamppb.New(now), Attempt: 1,
		AttemptDueTime: timestamppb.New(now), Priority: spec.GetPriority(), Origin: sundialv1.RunOrigin_RUN_ORIGIN_SCHEDULE,
		DefinitionOffset: 123456, OwnerTeam: spec.GetOwnerTeam(), Labels: spec.GetLabels(), Payload: spec.GetPayload(),
		Target: spec.GetTarget(), Timeout: spec.GetTimeout(), Shard: 17, Epoch: 3, DispatchedAt: timestamppb.New(now),
	}
	return proto.Size(run)
}

func (b *Bench) baselines(ctx context.Context, cfg Config, ns Namespace, plan *loadgen.Plan, per PerRun) (Baselines, error) {
	bl := Baselines{PerRun: per}
	d := cfg.BaselineDuration
	size := runRecordSize(plan)
	b.say("baseline K: produce→consume %d-byte records on %d partitions, a warm-up of %s then %d × %s", size, topics.RunsPartitions, d/2, BaselineSamples, d)
	n := 0
	k, kSpread, err := measureStable(ctx, d, func(ctx context.Context, d time.Duration) (KafkaBaseline, error) {
		n++
		return MeasureKafka(ctx, b.Backends.Brokers, fmt.Sprintf("%sbaseline.k%d", ns.TopicPrefix, n), topics.RunsPartitions, size, d)
	}, func(k KafkaBaseline) float64 { return k.RecordsPerSec })
	if err != nil {
		return bl, err
	}
	bl.K, bl.KSpread = k, kSpread
	b.say("  K = %.0f records/s (samples %.0f), e2e p95 %.1f ms", k.RecordsPerSec, kSpread.Samples, k.E2EP95Ms)

	rc := redis.NewClient(&redis.Options{Addr: b.Backends.RedisAddr, PoolSize: 128})
	defer func() { _ = rc.Close() }()
	b.say("baseline R: lease EVALSHA plain (64 callers) and pipelined (128 per batch), a warm-up then %d × %s each", BaselineSamples, d)
	sample := 0
	r, rSpread, err := measureStable(ctx, d, func(ctx context.Context, d time.Duration) (RedisBaseline, error) {
		// MeasureRedis numbers its runs from 0: each sample takes keys of
		// its own, or it would find the previous sample's runs done.
		sample++
		ls, err := leasing.New(leasing.Config{Client: rc, KeyPrefix: fmt.Sprintf("%sbaseline%d:", ns.RedisPrefix, sample), TTL: 30 * time.Second, DoneRetention: 10 * time.Minute})
		if err != nil {
			return RedisBaseline{}, err
		}
		return MeasureRedis(ctx, ls, 64, 128, d)
	}, func(r RedisBaseline) float64 { return r.PlainCallsPerSec })
	if err != nil {
		return bl, err
	}
	bl.R, bl.RSpread = r, rSpread
	b.say("  R = %.0f calls/s plain (samples %.0f), %.0f pipelined", r.PlainCallsPerSec, rSpread.Samples, r.PipelinedCallsPerSec)

	st, err := cassandra.Open(ctx, cassandra.Config{Hosts: b.Backends.CassandraHosts, Keyspace: ns.Keyspace})
	if err != nil {
		return bl, fmt.Errorf("baseline C: %w", err)
	}
	defer func() { _ = st.Close() }()
	b.say("baseline C: PutDue of one due entry, 64 in flight, a warm-up then %d × %s", BaselineSamples, d)
	c, cSpread, err := measureStable(ctx, d, func(ctx context.Context, d time.Duration) (CassandraBaseline, error) {
		return MeasureCassandra(ctx, st, 64, d, b.Now())
	}, func(c CassandraBaseline) float64 { return c.WritesPerSec })
	if err != nil {
		return bl, err
	}
	bl.C, bl.CSpread = c, cSpread
	b.say("  C = %.0f writes/s (samples %.0f)", c.WritesPerSec, cSpread.Samples)
	bl.RRunsPerSec = r.PlainCallsPerSec / float64(per.LeaseCalls)
	if per.CassandraWrites > 0 {
		bl.CRunsPerSec = c.WritesPerSec / float64(per.CassandraWrites)
	}
	bl.B, bl.BottleneckOf = Bottleneck(k, r, c, per)
	bl.L, bl.LimitOf = Limit(k, r, c)
	b.say("  B = %.0f runs/s (%s); L = %.0f runs/s (%s)", bl.B, bl.BottleneckOf, bl.L, bl.LimitOf)
	// The R baseline's scripts fill Redis's append-only file; compacted now,
	// before the window, a Redis killed in it replays the window's writes
	// only, as a Redis that ran the workload alone would.
	start := b.Now()
	switch done, err := compactRedisLog(ctx, rc); {
	case err != nil:
		b.say("  the redis append-only file stays as the baselines left it: %v", err)
	case done:
		b.say("  redis append-only file rewritten after the baselines in %.1fs", b.Now().Sub(start).Seconds())
	}
	return bl, nil
}

type pipeline interface {
	Start(ctx context.Context) error
	Stop()
	Describe() string
}

// runSundial runs the workload through Sundial.
func (b *Bench) runSundial(ctx context.Context, cfg *Config, ns Namespace) (System, WorkloadInfo, error) {
	sys := System{Name: "sundial"}
	sc := scenarioNamed(cfg.Scenario)
	ds := loadgen.NewDownstream(loadgen.DownstreamConfig{EffectDuration: cfg.EffectDuration})
	if err := ds.Start(ctx, "127.0.0.1:0"); err != nil {
		return sys, WorkloadInfo{}, err
	}
	defer ds.Stop()

	pl, procs, cleanup, err := b.startPipeline(ctx, cfg, ns, sc, ds.URL())
	if err != nil {
		return sys, WorkloadInfo{}, err
	}
	defer cleanup()
	defer pl.Stop()
	// A dispatcher uses the snapshot of its job that an entry carries only
	// when the definition was produced at least 5 s (its allowance for
	// clock skew) after its jobs feed began; one produced sooner is read at
	// its first firing. Registering at once made most first firings of a
	// 100,000-job workload read their job (about 800 reads/s at 1,000/s), a
	// start-up cost a cluster that has been running does not pay.
	b.say("waiting %s for the dispatchers' jobs feeds to settle", pipelineSettle)
	if !backoff.Sleep(ctx, pipelineSettle) {
		return sys, WorkloadInfo{}, ctx.Err()
	}

	plan, err := b.plan(*cfg, cmp.Or(cfg.jobPrefix, ns.ID), ds.URL())
	if err != nil {
		return sys, WorkloadInfo{}, err
	}
	cl, err := client.New(client.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(b.Backends.Brokers...)}, Topics: ns.Names(), Logger: b.Logger})
	if err != nil {
		return sys, WorkloadInfo{}, err
	}
	defer cl.Close()
	rec := loadgen.NewRecorder(plan.ParseRunID, plan.Start, plan.Start.Add(plan.Duration))
	gen, err := loadgen.New(loadgen.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(b.Backends.Brokers...)}, Topics: ns.Names(), Plan: plan, Client: cl, Recorder: rec,
		Progress: b.Progress, Logger: b.Logger})
	if err != nil {
		return sys, WorkloadInfo{}, err
	}
	if err := gen.Start(ctx); err != nil {
		return sys, WorkloadInfo{}, err
	}
	defer gen.Stop()
	mem, runnerMem, stopMem := b.sampleMemory(ctx, *cfg, procs, gen, plan)
	defer stopMem()

	var regWatch *registrationWatch
	if !sc.step() {
		regWatch = b.watchRegistration(ctx, *cfg, procs)
	}
	from, to, regSecs, err := b.register(ctx, cfg, plan, gen, rec)
	if regWatch != nil {
		sys.Registration = regWatch.finish(plan.Jobs)
	}
	if err != nil {
		return sys, WorkloadInfo{}, err
	}
	wl := workloadInfo(plan, from, to, regSecs)

	run := &sundialRun{cfg: cfg, ns: ns, procs: procs, ds: ds, gen: gen, plan: plan, from: from, to: to, pl: pl}
	inject, err := sc.inject(ctx, b, run)
	if err != nil {
		return sys, wl, err
	}
	crashDone := make(chan struct{})
	if inject != nil {
		go func() {
			defer close(crashDone)
			run.crashes = inject()
		}()
	} else {
		close(crashDone)
	}

	if err := b.window(ctx, *cfg, sc, run, &sys); err != nil {
		return sys, wl, err
	}
	<-crashDone
	b.drain(ctx, cfg.Drain, rec, plan, from, to)
	if err := sc.settle(ctx, b, run, &sys); err != nil {
		return sys, wl, err
	}
	gen.Stop()

	tally(&sys, run, rec, mem, runnerMem)
	return sys, wl, nil
}

// startPipeline starts the pipeline the configuration asks for: in this
// process, or with subprocesses (procs, nil otherwise), and with the SDK
// workers of a workers run (Bench.workers while it runs). effectURL is the
// counting downstream's, for the pipeline's handlers. cleanup, to call
// after the pipeline stopped, deletes what the subprocesses left in Redis.
func (b *Bench) startPipeline(ctx context.Context, cfg *Config, ns Namespace, sc scenario, effectURL string) (pipeline, *Processes, func(), error) {
	cleanup := func() {}
	pc := PipelineConfig{Backends: b.Backends, Namespace: ns, Dispatchers: cfg.Dispatchers, Runners: cfg.Runners,
		RunnerConcurrency: cfg.RunnerConcurrency, MemoryLimitMiB: cfg.MemoryLimitMiB, RegistryConcurrency: cfg.RegistryConcurrency, RunnerHTTPIdleConns: cfg.RunnerHTTPIdleConns, History: cfg.History, Logger: b.Logger}
	pc.EffectURL = effectURL
	supervise := sc.pipeline(*cfg, &pc)
	var pl pipeline
	var procs *Processes
	if cfg.Processes || cfg.DispatcherProcess {
		bin := cfg.Binary
		tmp, err := os.MkdirTemp("", "sundial-bench-")
		if err != nil {
			return nil, nil, cleanup, err
		}
		if bin == "" {
			b.say("building the sundial binary")
			if bin, err = BuildBinary(ctx, tmp); err != nil {
				return nil, nil, cleanup, err
			}
		}
		procs = NewProcesses(pc, bin, filepath.Join(tmp, "logs"))
		procs.InProcessRunners = !cfg.Processes
		procs.Supervise = supervise
		procs.Now = b.Now
		pl = procs
		cleanup = func() {
			// Runners started as processes use the default lease key prefix.
			rc := redis.NewClient(&redis.Options{Addr: b.Backends.RedisAddr})
			defer func() { _ = rc.Close() }()
			_ = deleteKeys(context.WithoutCancel(ctx), rc, leasing.DefaultKeyPrefix+"{"+ns.ID+"-*")
		}
	} else {
		pl = NewInProcess(pc)
	}
	if cfg.viaWorkers {
		if cfg.Binary == "" {
			return nil, nil, cleanup, errors.New("bench: workers: the sundial binary of the gateway and the workers is not built")
		}
		wk := &Workers{Binary: cfg.Binary, Backends: b.Backends, Namespace: ns, Count: cfg.Workers, Slots: cfg.WorkerSlots,
			EffectURL: effectURL, LogDir: filepath.Join(os.TempDir(), "sundial-bench-"+ns.ID+"-workers")}
		pl = &workersPipeline{pipeline: pl, workers: wk}
		b.workers = wk
		done := cleanup
		cleanup = func() { b.workers = nil; done() }
	}
	cfg.Pipeline = pl.Describe()
	b.say("starting the pipeline: %s", cfg.Pipeline)
	if err := pl.Start(ctx); err != nil {
		cleanup()
		return nil, nil, func() {}, err
	}
	return pl, procs, cleanup, nil
}

// sampleMemory samples the memory of the first dispatcher and the first
// runner, when they run as subprocesses (nil samplers otherwise), until
// stop is called.
func (b *Bench) sampleMemory(ctx context.Context, cfg Config, procs *Processes, gen *loadgen.Generator, plan *loadgen.Plan) (mem, runnerMem *memorySampler, stop func()) {
	var stops []func()
	stop = func() {
		for _, stop := range stops {
			stop()
		}
	}
	if procs == nil {
		return nil, nil, stop
	}
	sampler := func(victim string) *memorySampler {
		m := &memorySampler{name: victim, every: time.Second, now: b.Now, say: b.say,
			pid:    func() (int, bool) { return procs.PID(victim) },
			stored: func() int64 { return gen.Counters().Accepted }, marks: memoryMarks(int64(plan.Jobs))}
		memCtx, stopMem := context.WithCancel(ctx)
		memDone := make(chan struct{})
		go func() { defer close(memDone); m.run(memCtx) }()
		stops = append(stops, func() { stopMem(); <-memDone })
		return m
	}
	mem = sampler("dispatcher-0")
	if cfg.Processes {
		runnerMem = sampler("runner-0")
	}
	return mem, runnerMem, stop
}

// workloadInfo describes the registered plan and its window.
func workloadInfo(plan *loadgen.Plan, from, to time.Time, regSecs float64) WorkloadInfo {
	wl := WorkloadInfo{Jobs: plan.Jobs, IntervalJobs: plan.IntervalJobs, CronJobs: plan.CronJobs, AtJobs: plan.AtJobs,
		PeriodMs: plan.Period.Milliseconds(), PlannedRate: plan.PlannedRate, HerdAt: plan.HerdAt, SplayMs: plan.Splay.Milliseconds(), WindowFrom: from, WindowTo: to,
		Target: plan.Target.URL + plan.Target.Handler, PayloadBytes: plan.PayloadBytes, RegisterSeconds: regSecs}
	if plan.Target.URL != "" {
		wl.Target = "HTTP POST to the counting downstream"
	}
	return wl
}

// window waits out the measured window; unless the run is a step of many,
// it samples the CPU and takes the profiles of the processes meanwhile, into
// sys.
func (b *Bench) window(ctx context.Context, cfg Config, sc scenario, run *sundialRun, sys *System) error {
	plan, procs, from, to := run.plan, run.procs, run.from, run.to
	b.say("window %s to %s; waiting", from.Format("15:04:05"), to.Format("15:04:05"))
	// A capacity step is one of many: the window of each is too short to
	// profile, and the search's report is about rates, not processes.
	var watch *windowWatch
	if !sc.step() {
		// A herd's runs fall due in one instant and start over the tens
		// of seconds after it: its CPU and profiles cover herdWatch from
		// the due time, not the one second of its window.
		watchTo := to
		if plan.Herd() && to.Before(from.Add(herdWatch)) {
			watchTo = from.Add(herdWatch)
		}
		watch = b.watchWindow(ctx, cfg, procs, from, watchTo)
		defer watch.stop()
	}
	stopProfile := b.profile(ctx, from)
	stopWork := b.countWork(ctx, run)
	if !sleepUntil(ctx, to) {
		stopProfile()
		return ctx.Err()
	}
	stopProfile()
	stopWork()
	if watch != nil {
		sys.Profiles, sys.CPU = watch.wait()
		if b.CPUProfile != "" {
			sys.Profiles = append([]Profile{readCPUProfileFile(b.CPUProfile, from, to)}, sys.Profiles...)
		}
		for _, pr := range sys.Profiles {
			if pr.Error != "" {
				b.say("profile %s %s: %s", pr.Process, pr.Kind, pr.Error)
			}
		}
	}
	return nil
}

// countWork reads the pipeline's backend work at the start of the window;
// the returned function reads it again at its end, into run.
func (b *Bench) countWork(ctx context.Context, run *sundialRun) func() {
	ws, ok := run.pl.(workSource)
	if !ok || !sleepUntil(ctx, run.from) {
		return func() {}
	}
	before, err := ws.Work(ctx)
	if err != nil {
		b.say("backend work: %v", err)
		return func() {}
	}
	return func() {
		after, err := ws.Work(ctx)
		if err != nil {
			b.say("backend work: %v", err)
			return
		}
		run.workBefore, run.workAfter = before, after
	}
}

// tally fills sys with what the run's recorder, downstream, memory
// samplers and kills measured.
func tally(sys *System, run *sundialRun, rec *loadgen.Recorder, mem, runnerMem *memorySampler) {
	plan, gen, from, to := run.plan, run.gen, run.from, run.to
	counts := rec.Result(plan.Expected(from, to))
	hist := rec.Trigger()
	sys.Trigger = Summarise(hist)
	d := Summarise(rec.Dispatch())
	sys.Dispatch = &d
	sys.Counts = counts
	sys.Effects = run.ds.Effects()
	if mem != nil {
		mem.sample()
		sys.DispatcherMemory = mem.report(from, to)
	}
	if runnerMem != nil {
		runnerMem.sample()
		sys.RunnerMemory = runnerMem.report(from, to)
	}
	sys.Series = Series(rec.Samples(), from)
	sys.hist = hist
	starts := rec.Starts()
	sys.rates(plan, counts, starts, from, to)
	sys.StartsPerSec = startsPerSecond(starts, from)
	if run.workAfter != nil && counts.StartedDuringWindow > 0 {
		sys.Work = workPerRun(run.workBefore, run.workAfter, float64(counts.StartedDuringWindow))
	}
	gc := gen.Counters()
	if gc.RunRecordsCreateTime > 0 {
		sys.Notes = append(sys.Notes, fmt.Sprintf("%d run records carried CreateTime instead of LogAppendTime", gc.RunRecordsCreateTime))
	}
	for _, k := range counts.LostExamples {
		sys.Notes = append(sys.Notes, fmt.Sprintf("lost run %s@%d (%s job): %d run record(s) seen on the runs topics",
			plan.JobID(int(k.Job)), k.DueMs, plan.Kind(int(k.Job)), rec.DispatchesOf(k)))
	}
	for _, d := range counts.DuplicateExamples {
		sys.Notes = append(sys.Notes, "executed more than once: "+d)
	}
	sys.Crash = run.crashes
	for i := range sys.Crash {
		sys.Crash[i].ThresholdMs, sys.Crash[i].RecoverySeconds = recovery(sys.Series, from, sys.Crash, i)
		sys.Crash[i].SettledSeconds = new(settled(sys.Series, from, sys.Crash, i, sys.Crash[i].ThresholdMs))
	}
}

// profile writes a CPU profile of this process from the start of the
// window until the returned function is called, when CPUProfile is set.
func (b *Bench) profile(ctx context.Context, from time.Time) func() {
	if b.CPUProfile == "" || !sleepUntil(ctx, from) {
		return func() {}
	}
	f, err := os.Create(b.CPUProfile)
	if err != nil {
		b.say("cpu profile: %v", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.say("cpu profile: %v", err)
		_ = f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
		b.say("cpu profile of the window written to %s", b.CPUProfile)
	}
}

// register registers the plan and returns the measured window. Steady
// plans: the recurring jobs first; once they are accepted the window starts
// Lead later and the one-offs (spread over the window) are registered.
// Herds: all at once, and they must be accepted before the herd is due.
func (b *Bench) register(ctx context.Context, cfg *Config, plan *loadgen.Plan, gen *loadgen.Generator, rec *loadgen.Recorder) (from, to time.Time, regSecs float64, err error) {
	regStart := b.Now()
	waitCtx, cancel := context.WithTimeout(ctx, 45*time.Minute)
	defer cancel()
	if plan.Herd() {
		b.say("registering a herd of %d one-offs due at %s", plan.Jobs, plan.HerdAt.Format("15:04:05.000"))
		if err := gen.Register(waitCtx, 0, plan.Jobs); err != nil {
			return from, to, 0, err
		}
		herdCtx, cancel := context.WithDeadline(waitCtx, plan.HerdAt)
		defer cancel()
		if err := gen.WaitAccepted(herdCtx, plan.Jobs); err != nil {
			return from, to, 0, fmt.Errorf("the herd was not accepted before it fell due (raise --lead): %w", err)
		}
		regSecs = b.Now().Sub(regStart).Seconds()
		from, to = plan.HerdAt, plan.HerdAt.Add(time.Millisecond)
		rec.SetWindow(from, to)
		return from, to, regSecs, nil
	}
	recurring := plan.IntervalJobs + plan.CronJobs
	if plan.IntervalJobs > 0 {
		// Register the cron jobs first and time them (or assume a modest
		// rate when there are too few to time); the interval jobs then
		// start (Interval.start, on the same grid) once all of them should
		// be registered, so that the window begins in a steady state: the
		// jobs registered first neither slow the registry nor leave a
		// backlog of catch-up runs behind.
		rate := 300.0
		if plan.CronJobs > 0 {
			b.say("registering %d cron jobs first, to time the registry", plan.CronJobs)
			t0 := b.Now()
			if err := gen.Register(waitCtx, plan.IntervalJobs, recurring); err != nil {
				return from, to, 0, err
			}
			if err := gen.WaitAccepted(waitCtx, plan.CronJobs); err != nil {
				return from, to, 0, err
			}
			if plan.CronJobs >= 1000 {
				rate = float64(plan.CronJobs) / b.Now().Sub(t0).Seconds()
			}
		}
		est := time.Duration(float64(plan.IntervalJobs) / rate * 1.25 * float64(time.Second))
		plan.NotBefore = b.Now().Add(est + 30*time.Second)
		b.say("registry: %.0f definitions/s; the interval jobs start firing at %s", rate, plan.NotBefore.Format("15:04:05"))
		b.say("registering %d interval jobs (every %s)", plan.IntervalJobs, plan.Period)
		if err := gen.Register(waitCtx, 0, plan.IntervalJobs); err != nil {
			return from, to, 0, err
		}
	} else {
		b.say("registering %d cron jobs", plan.CronJobs)
		if err := gen.Register(waitCtx, 0, recurring); err != nil {
			return from, to, 0, err
		}
	}
	if err := gen.WaitAccepted(waitCtx, recurring); err != nil {
		return from, to, 0, err
	}
	from = b.Now().Add(cfg.Lead)
	if plan.NotBefore.After(from) {
		b.say("registered ahead of the estimate; waiting for the interval jobs' start")
		from = plan.NotBefore
	}
	from = from.Add(time.Second - 1).Truncate(time.Second)
	to = from.Add(plan.Duration)
	plan.Start = from
	rec.SetWindow(from, to)
	if plan.AtJobs > 0 {
		b.say("registering %d one-offs spread over the window", plan.AtJobs)
		if err := gen.Register(waitCtx, recurring, plan.Jobs); err != nil {
			return from, to, 0, err
		}
		atCtx, cancel := context.WithDeadline(waitCtx, from)
		defer cancel()
		if err := gen.WaitAccepted(atCtx, plan.Jobs); err != nil {
			return from, to, 0, fmt.Errorf("the one-offs were not accepted before the window (raise --lead): %w", err)
		}
	}
	regSecs = b.Now().Sub(regStart).Seconds()
	b.say("%d definitions accepted in %.1fs", plan.Jobs, regSecs)
	return from, to, regSecs, nil
}

// defineDags produces the chaos run's DAGs and waits until the DAG
// engines stored them.
func (b *Bench) defineDags(ctx context.Context, dw DagWorkload, procs *Processes) error {
	if err := dw.Validate(); err != nil {
		return err
	}
	b.say("defining %d DAGs of %d nodes, every %s from %s", dw.Count, dw.Nodes, dw.Every, dw.Start.Format("15:04:05"))
	if err := dw.Apply(ctx, b.Backends.Brokers, procs.cfg.Namespace.Names()); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	return dw.WaitStored(wctx, procs.Store())
}

// drainDags waits until every DAG run due in the window ended, or d
// passed, and counts them.
func (b *Bench) drainDags(ctx context.Context, d time.Duration, dw DagWorkload, procs *Processes, from, to time.Time) (DagCounts, error) {
	expected := dw.Expected(from, to)
	perDag := int(to.Sub(from)/dw.Every) + 1000
	deadline := b.Now().Add(d)
	for {
		stored, err := dw.ReadDagRuns(ctx, procs.Store(), perDag)
		if err != nil {
			return DagCounts{}, err
		}
		c := CountDagRuns(expected, stored, from, to)
		c.DAGs, c.Nodes, c.EveryMs = dw.Count, dw.Nodes, dw.Every.Milliseconds()
		evG, _ := procs.cfg.dagGroups()
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		c.EngineLag, err = groupLag(lctx, b.Backends.Brokers, evG, procs.cfg.Namespace.Names().Events())
		cancel()
		if err != nil {
			b.say("DAG engines' lag: %v", err)
			c.EngineLag = -1
		}
		if c.Lost == 0 || !b.Now().Before(deadline) {
			b.say("DAG runs: %s", c)
			return c, nil
		}
		b.say("draining DAG runs: %d of %d not ended yet; the DAG engines' lag on sundial.events is %d records", c.Lost, c.Expected, c.EngineLag)
		if !sleepUntil(ctx, minTime(deadline, b.Now().Add(5*time.Second))) {
			return c, ctx.Err()
		}
	}
}

// drain waits until every expected run started, or d passed.
func (b *Bench) drain(ctx context.Context, d time.Duration, rec *loadgen.Recorder, plan *loadgen.Plan, from, to time.Time) {
	deadline := b.Now().Add(d)
	for {
		c := rec.Result(plan.Expected(from, to))
		if c.Lost == 0 {
			return
		}
		if !b.Now().Before(deadline) {
			b.say("drain over with %d of %d runs not started", c.Lost, c.Expected)
			return
		}
		b.say("draining: %d of %d runs not started yet", c.Lost, c.Expected)
		if !sleepUntil(ctx, minTime(deadline, b.Now().Add(5*time.Second))) {
			return
		}
	}
}

func minTime(a, c time.Time) time.Time {
	if a.Before(c) {
		return a
	}
	return c
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	return backoff.Sleep(ctx, time.Until(t))
}

// crash kills a runner at from+CrashAfter and a dispatcher at
// from+2*CrashAfter (as CrashKill says), each restarted CrashDown later.
func (b *Bench) crash(ctx context.Context, cfg Config, procs *Processes, from time.Time) []CrashEvent {
	var out []CrashEvent
	var victims []string
	switch cfg.CrashKill {
	case "runner":
		victims = []string{"runner-0"}
	case "dispatcher":
		victims = []string{"dispatcher-0"}
	default:
		victims = []string{"runner-0", "dispatcher-0"}
	}
	for i, v := range victims {
		if !sleepUntil(ctx, from.Add(time.Duration(i+1)*cfg.CrashAfter)) {
			return out
		}
		ev := CrashEvent{Process: v, KilledAt: b.Now()}
		if err := procs.Kill(v); err != nil {
			b.say("kill %s: %v", v, err)
			continue
		}
		b.say("SIGKILL %s", v)
		if !sleepUntil(ctx, ev.KilledAt.Add(cfg.CrashDown)) {
			return out
		}
		if err := procs.Restart(v); err != nil {
			b.say("restart %s: %v", v, err)
		}
		ev.Restarted = b.Now()
		b.say("restarted %s", v)
		out = append(out, ev)
	}
	return out
}

// recovery is the time from crash i's kill until the per-second p99 of the
// runs due after it stays under the threshold (up to the next kill, see
// countedUntil, or the end of the series); -1 if the last second counted
// is still over it. The threshold is the larger of 250ms and twice the
// median per-second p99 of the seconds that ended at least 10s before the
// first kill: runs due just before a kill may still be queued on the
// killed process, so those seconds do not count as the undisturbed state.
func recovery(series []SeriesPoint, from time.Time, crashes []CrashEvent, i int) (thresholdMs, seconds float64) {
	firstKill := crashes[0].KilledAt.Sub(from).Seconds()
	var before []float64
	for _, sp := range series {
		if float64(sp.Second)+1 <= firstKill-10 {
			before = append(before, sp.P99Ms)
		}
	}
	thresholdMs = 250
	if len(before) > 0 {
		thresholdMs = math.Max(thresholdMs, 2*percentile(before, 0.5))
	}
	kill := crashes[i].KilledAt.Sub(from).Seconds()
	end := countedUntil(from, crashes, i, thresholdMs)
	lastBad, lastCounted := -1.0, -1.0
	for _, sp := range series {
		s := float64(sp.Second)
		if s+1 <= kill || s+1 > end {
			continue
		}
		lastCounted = max(lastCounted, s+1)
		if sp.P99Ms > thresholdMs {
			lastBad = max(lastBad, s+1)
		}
	}
	if !math.IsInf(end, 1) && (lastCounted < 0 || lastBad >= lastCounted) {
		return thresholdMs, -1
	}
	if lastBad < 0 {
		return thresholdMs, 0
	}
	return thresholdMs, lastBad - kill
}

// countedUntil is the end, in seconds into the window, of the seconds
// whose runs count for crash i: +Inf for the last crash, else one
// threshold before the next kill. A run due less than a threshold before
// the next kill that is late may be late because of that kill (queued on
// the process it killed), not because this one's effects lasted.
func countedUntil(from time.Time, crashes []CrashEvent, i int, thresholdMs float64) float64 {
	if i+1 >= len(crashes) {
		return math.Inf(1)
	}
	return crashes[i+1].KilledAt.Sub(from).Seconds() - thresholdMs/1000
}

// settleSeconds is how many seconds in a row under the threshold make a
// kill settled (CrashEvent.SettledSeconds).
const settleSeconds = 5

// settled is the time from crash i's kill until the first of settleSeconds
// seconds in a row, from the second of the kill on, whose p99 is at most
// thresholdMs (a second with no runs due counts as under it), all counted
// for it (countedUntil) and before the end of the series; -1 if there are
// none.
func settled(series []SeriesPoint, from time.Time, crashes []CrashEvent, i int, thresholdMs float64) float64 {
	kill := crashes[i].KilledAt.Sub(from).Seconds()
	p99 := map[int]float64{}
	last := -1
	for _, sp := range series {
		p99[sp.Second] = sp.P99Ms
		last = max(last, sp.Second)
	}
	end := min(float64(last+1), countedUntil(from, crashes, i, thresholdMs))
	run := 0
	for s := int(math.Floor(kill)); float64(s+1) <= end; s++ {
		if p99[s] > thresholdMs {
			run = 0
			continue
		}
		if run++; run == settleSeconds {
			return math.Max(0, float64(s-settleSeconds+1)-kill)
		}
	}
	return -1
}

// Recovery recomputes the recovery of every crash of every system of r
// from its series (for reports written before a change of the rule).
func Recovery(r *Report) {
	for si := range r.Systems {
		s := &r.Systems[si]
		for i := range s.Crash {
			s.Crash[i].ThresholdMs, s.Crash[i].RecoverySeconds = recovery(s.Series, r.Workload.WindowFrom, s.Crash, i)
			s.Crash[i].SettledSeconds = new(settled(s.Series, r.Workload.WindowFrom, s.Crash, i, s.Crash[i].ThresholdMs))
		}
	}
}

func percentile(v []float64, q float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(i, 0)]
}

// targets compares the report with the project's targets.
func targets(cfg Config, r *Report) []Target {
	if len(r.Systems) == 0 {
		return nil
	}
	s := r.Systems[0]
	var out []Target
	add := func(name, want string, v float64, met bool) {
		out = append(out, Target{Name: name, Want: want, Value: v, Met: met})
	}
	scenarioNamed(cfg.Scenario).targets(cfg, r, s, add)
	return out
}

// startsPerSecond counts starts (unix ms, in order) by the second since
// from they fall in; starts before from are left out.
func startsPerSecond(starts []int64, from time.Time) []int {
	var out []int
	for _, t := range starts {
		if t < from.UnixMilli() {
			continue
		}
		sec := (t - from.UnixMilli()) / 1000
		for int64(len(out)) <= sec {
			out = append(out, 0)
		}
		out[sec]++
	}
	return out
}

// peakPerSecond is the most instants of starts (unix ms, in order) within
// one second of each other.
func peakPerSecond(starts []int64) int {
	peak, lo := 0, 0
	for hi, t := range starts {
		for starts[lo] <= t-1000 {
			lo++
		}
		peak = max(peak, hi-lo+1)
	}
	return peak
}
