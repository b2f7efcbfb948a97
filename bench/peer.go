package bench

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/loadgen"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// A queue is a peer the bench runs the workload on: a task queue with
// tasks scheduled for a time and no store of recurring definitions that
// scales to a million jobs, so each job is a chain of tasks. The first
// occurrence is scheduled at its due time with the run id as its unique
// key, and each execution schedules the job's next occurrence the same way
// before it does its work, as a team would build recurring jobs on it.
type queue interface {
	// schedule makes the job's occurrence due at dueMs a task of the
	// queue, once: scheduling one already there is not an error.
	schedule(ctx context.Context, job uint32, dueMs int64) error
	// start starts executing tasks through the peer's execute; stop ends
	// it and removes what the run left in the backend.
	start(ctx context.Context) error
	stop(ctx context.Context)
	// note describes the peer's settings and counters for the report.
	note() string
}

// peerRun is what every queue shares: the plan, the recorder and the
// counting downstream. execute is the body of every task.
type peerRun struct {
	name  string
	plan  *loadgen.Plan
	rec   *loadgen.Recorder
	http  *http.Client
	url   string
	execs atomic.Int64
	errs  atomic.Int64
}

// execute is one execution of a job's occurrence by the peer: it records a
// STARTED event (its time minus the due time is the trigger latency),
// schedules the job's next occurrence through next, and calls the counting
// downstream with the run id as Idempotency-Key, as Sundial's runners do.
func (p *peerRun) execute(ctx context.Context, job uint32, dueMs int64, attempt int, next func(context.Context, uint32, int64) error) error {
	now := time.Now()
	jobID := p.plan.JobID(int(job))
	runID := jobID + "@" + strconv.FormatInt(dueMs, 10)
	due := time.UnixMilli(dueMs)
	p.rec.ObserveEvent(&sundialv1.RunEvent{RunId: runID, JobId: jobID, Attempt: uint32(attempt),
		State: sundialv1.RunState_RUN_STATE_STARTED, Time: timestamppb.New(now), DueTime: timestamppb.New(due),
		AttemptDueTime: timestamppb.New(due), RunnerId: p.name, FencingToken: p.execs.Add(1)})
	if n, ok := p.nextDue(job, dueMs); ok {
		if err := next(ctx, job, n); err != nil {
			p.errs.Add(1)
			return fmt.Errorf("schedule the next occurrence: %w", err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(nil))
	if err != nil {
		return err
	}
	req.Header.Set("Idempotency-Key", runID)
	req.Header.Set("Sundial-Job-Id", jobID)
	req.Header.Set("Sundial-Attempt", strconv.Itoa(attempt))
	resp, err := p.http.Do(req)
	if err != nil {
		p.errs.Add(1)
		return err
	}
	_ = resp.Body.Close()
	return nil
}

// nextDue is the job's first occurrence after dueMs, or false for one-offs.
func (p *peerRun) nextDue(job uint32, dueMs int64) (int64, bool) {
	switch {
	case int(job) < p.plan.IntervalJobs:
		return dueMs + p.plan.Period.Milliseconds(), true
	case int(job) < p.plan.IntervalJobs+p.plan.CronJobs:
		return dueMs + loadgen.CronPeriod.Milliseconds(), true
	}
	return 0, false
}

// runQueue runs the same workload (same jobs, rate, phases and window
// length) on a queue peer made by mk, and measures it as the Sundial run
// is measured: trigger latency, lost and duplicate runs, effects at the
// downstream, and the CPU of the bench process, of backends (the peer's
// own) and of the machine over the window.
func (b *Bench) runQueue(ctx context.Context, cfg *Config, ns Namespace, name string, backends []string,
	mk func(p *peerRun, workers int) (queue, error)) (System, error) {
	sys := System{Name: name}
	ds := loadgen.NewDownstream(loadgen.DownstreamConfig{EffectDuration: cfg.EffectDuration})
	if err := ds.Start(ctx, "127.0.0.1:0"); err != nil {
		return sys, err
	}
	defer ds.Stop()
	plan, err := b.plan(*cfg, ns.ID+name[:1], ds.URL())
	if err != nil {
		return sys, err
	}
	workers := cfg.peerWorkers()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = workers
	p := &peerRun{name: name, plan: plan, http: &http.Client{Transport: tr, Timeout: 10 * time.Second}, url: ds.URL()}
	q, err := mk(p, workers)
	if err != nil {
		return sys, err
	}

	regStart := b.Now()
	from := regStart.Add(cfg.Lead).Truncate(time.Second)
	if plan.Herd() {
		from = plan.HerdAt
	}
	// Bootstrapping schedules each job's first occurrence at or after the
	// window's start minus a warm-up as long as the lead, so the chains are
	// running when the window starts.
	warm := from.Add(-cfg.Lead / 2)
	plan.Start = from
	to := from.Add(plan.Duration)
	if plan.Herd() {
		to = from.Add(time.Millisecond)
	}
	p.rec = loadgen.NewRecorder(plan.ParseRunID, from, to)
	b.say("%s: %d workers; scheduling %d first occurrences", name, workers, plan.Jobs)
	if err := q.start(ctx); err != nil {
		return sys, fmt.Errorf("%s: start: %w", name, err)
	}
	defer q.stop(context.WithoutCancel(ctx))
	eg, egCtx := errgroup.WithContext(ctx)
	eg.SetLimit(32)
	var scheduled atomic.Int64
	for i := range plan.Jobs {
		eg.Go(func() error {
			due, ok := plan.NextDue(i, warm)
			if !ok {
				return nil
			}
			scheduled.Add(1)
			return q.schedule(egCtx, uint32(i), due)
		})
	}
	if err := eg.Wait(); err != nil {
		return sys, fmt.Errorf("%s: schedule: %w", name, err)
	}
	b.say("%s: %d tasks scheduled in %.1fs", name, scheduled.Load(), b.Now().Sub(regStart).Seconds())
	if b.Now().After(warm) {
		b.say("%s: warning: scheduling took past the warm-up start; the first runs of the window may be late", name)
	}
	go b.peerProgress(ctx, name, p.rec, to.Add(cfg.Drain))
	cpu := b.peerCPU(*cfg, backends)
	var sampled sync.WaitGroup
	sampled.Go(func() { cpu.run(ctx, from, to) })
	if !sleepUntil(ctx, to) {
		sampled.Wait()
		return sys, ctx.Err()
	}
	sampled.Wait()
	sys.CPU = cpu.report(runtime.NumCPU())
	b.drain(ctx, cfg.Drain, p.rec, plan, from, to)
	counts := p.rec.Result(plan.Expected(from, to))
	hist := p.rec.Trigger()
	sys.Trigger = Summarise(hist)
	sys.Counts = counts
	sys.Effects = ds.Effects()
	sys.Series = Series(p.rec.Samples(), from)
	sys.hist = hist
	sys.rates(plan, counts, p.rec.Starts(), from, to)
	sys.Notes = append(sys.Notes, q.note())
	return sys, nil
}

// peerProgress prints a peer's progress every 5 s until until.
func (b *Bench) peerProgress(ctx context.Context, name string, rec *loadgen.Recorder, until time.Time) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if b.Now().After(until) {
				return
			}
			p := rec.Progress()
			if b.Progress != nil {
				_, _ = fmt.Fprintf(b.Progress, "%-6s runs started %d  rate %.0f/s  p95 %s\n", name, p.Started, float64(p.RecentStarted)/5,
					p.RecentP95.Round(100*time.Microsecond))
			}
		}
	}
}

// peerCPU is the sampler, over a peer's window, of the CPU of the bench
// process (where a peer's workers run, beside the load generator and the
// downstream), of the backends the peer uses (backends: kafka, cassandra,
// redis of the stack, postgres) and of the machine, as the Sundial run's
// window is sampled. PostgreSQL is the process listening on the port of
// Backends.PostgresURL, counted with its children (one a connection).
func (b *Bench) peerCPU(cfg Config, backends []string) *cpuSampler {
	self := os.Getpid()
	procs := []cpuProcess{{name: "bench", role: "pipeline", pid: func() (int, bool, string) { return self, true, "" }}}
	for _, p := range backendCPUProcesses(stackDir(cfg.StackScript), b.Backends) {
		if slices.Contains(backends, p.name) {
			procs = append(procs, p)
		}
	}
	if slices.Contains(backends, "postgres") {
		procs = append(procs, postgresCPUProcess(b.Backends.PostgresURL))
	}
	return &cpuSampler{procs: procs, every: time.Second, now: b.Now}
}

// postgresCPUProcess is the PostgreSQL server at rawURL: the process
// listening on its port (5432 when the URL names none), with its
// children; found once and kept while it lives.
func postgresCPUProcess(rawURL string) cpuProcess {
	return cpuProcess{name: "postgres", role: "backend", tree: true, pid: cachedPID(func() (int, string) {
		u, err := url.Parse(rawURL)
		if err != nil {
			return 0, "the PostgreSQL URL does not parse"
		}
		port, err := strconv.Atoi(cmp.Or(u.Port(), "5432"))
		if err != nil {
			return 0, "the PostgreSQL URL's port is not a number"
		}
		if pid, ok := portOwner("/proc", port); ok {
			return pid, ""
		}
		return 0, fmt.Sprintf("no process of this machine listening on port %d", port)
	})}
}
