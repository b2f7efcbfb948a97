package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/loadgen"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// asynqTaskType is the one task type of the peer run.
const asynqTaskType = "bench:run"

// asynqPeer runs a plan's workload on asynq over the same Redis. asynq has
// no store of recurring definitions that scales to a million jobs (its
// periodic task manager keeps every entry in one process's cron), so each
// job is a chain of tasks: the first occurrence is enqueued with ProcessAt
// and TaskID = the run id, and each execution enqueues the job's next
// occurrence the same way before it does its work, as a team would build
// recurring jobs on asynq. Every execution is recorded as a STARTED event
// (time minus due time is the trigger latency) and calls the counting
// downstream with the run id as Idempotency-Key, as Sundial's runners do.
type asynqPeer struct {
	plan   *loadgen.Plan
	rec    *loadgen.Recorder
	client *asynq.Client
	http   *http.Client
	url    string
	queue  string
	execs  atomic.Int64
	errs   atomic.Int64
}

// payload of a task: the job index and the due time in unix ms.
func encodeTask(job uint32, dueMs int64) []byte {
	b := make([]byte, 12)
	binary.BigEndian.PutUint32(b, job)
	binary.BigEndian.PutUint64(b[4:], uint64(dueMs))
	return b
}

func decodeTask(b []byte) (uint32, int64, error) {
	if len(b) != 12 {
		return 0, 0, fmt.Errorf("task payload of %d bytes, want 12", len(b))
	}
	return binary.BigEndian.Uint32(b), int64(binary.BigEndian.Uint64(b[4:])), nil
}

func (a *asynqPeer) enqueue(ctx context.Context, job uint32, dueMs int64) error {
	runID := a.plan.JobID(int(job)) + "@" + strconv.FormatInt(dueMs, 10)
	_, err := a.client.EnqueueContext(ctx, asynq.NewTask(asynqTaskType, encodeTask(job, dueMs)),
		asynq.ProcessAt(time.UnixMilli(dueMs)), asynq.TaskID(runID), asynq.Queue(a.queue), asynq.MaxRetry(3), asynq.Retention(time.Hour))
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return nil // already enqueued: the chain goes on once
	}
	return err
}

// next is the job's first occurrence after dueMs, or false for one-offs.
func (a *asynqPeer) next(job uint32, dueMs int64) (int64, bool) {
	p := a.plan
	switch {
	case int(job) < p.IntervalJobs:
		return dueMs + p.Period.Milliseconds(), true
	case int(job) < p.IntervalJobs+p.CronJobs:
		return dueMs + loadgen.CronPeriod.Milliseconds(), true
	}
	return 0, false
}

func (a *asynqPeer) handle(ctx context.Context, t *asynq.Task) error {
	now := time.Now()
	job, dueMs, err := decodeTask(t.Payload())
	if err != nil {
		return fmt.Errorf("%w: %w", asynq.SkipRetry, err)
	}
	retry, _ := asynq.GetRetryCount(ctx)
	runID := a.plan.JobID(int(job)) + "@" + strconv.FormatInt(dueMs, 10)
	due := time.UnixMilli(dueMs)
	a.rec.ObserveEvent(&sundialv1.RunEvent{RunId: runID, JobId: a.plan.JobID(int(job)), Attempt: uint32(retry + 1),
		State: sundialv1.RunState_RUN_STATE_STARTED, Time: timestamppb.New(now), DueTime: timestamppb.New(due),
		AttemptDueTime: timestamppb.New(due), RunnerId: "asynq", FencingToken: a.execs.Add(1)})
	if n, ok := a.next(job, dueMs); ok {
		if err := a.enqueue(ctx, job, n); err != nil {
			a.errs.Add(1)
			return fmt.Errorf("enqueue the next occurrence: %w", err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url, bytes.NewReader(nil))
	if err != nil {
		return err
	}
	req.Header.Set("Idempotency-Key", runID)
	req.Header.Set("Sundial-Job-Id", a.plan.JobID(int(job)))
	req.Header.Set("Sundial-Attempt", strconv.Itoa(retry+1))
	resp, err := a.http.Do(req)
	if err != nil {
		a.errs.Add(1)
		return err
	}
	_ = resp.Body.Close()
	return nil
}

// runAsynq runs the same workload (same jobs, rate, phases and window
// length) on asynq.
func (b *Bench) runAsynq(ctx context.Context, cfg *Config, ns Namespace) (System, error) {
	sys := System{Name: "asynq"}
	ds := loadgen.NewDownstream(loadgen.DownstreamConfig{EffectDuration: cfg.EffectDuration})
	if err := ds.Start(ctx, "127.0.0.1:0"); err != nil {
		return sys, err
	}
	defer ds.Stop()
	plan, err := b.plan(*cfg, ns.ID+"a", ds.URL())
	if err != nil {
		return sys, err
	}
	rc := redis.NewClient(&redis.Options{Addr: b.Backends.RedisAddr, PoolSize: 128})
	defer func() { _ = rc.Close() }()
	queue := "bench-" + ns.ID
	workers := cmp.Or(cfg.AsynqConcurrency, cfg.Runners*cmp.Or(cfg.RunnerConcurrency, 64))
	cfg.AsynqConcurrency = workers
	check := cmp.Or(cfg.AsynqDelayedCheck, 5*time.Second)
	cfg.AsynqDelayedCheck = check
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = workers
	peer := &asynqPeer{plan: plan, client: asynq.NewClientFromRedisClient(rc), http: &http.Client{Transport: tr, Timeout: 10 * time.Second},
		url: ds.URL(), queue: queue}
	srv := asynq.NewServerFromRedisClient(rc, asynq.Config{Concurrency: workers, Queues: map[string]int{queue: 1},
		DelayedTaskCheckInterval: check, LogLevel: asynq.ErrorLevel, ShutdownTimeout: 10 * time.Second})
	mux := asynq.NewServeMux()
	mux.HandleFunc(asynqTaskType, peer.handle)
	defer func() {
		insp := asynq.NewInspectorFromRedisClient(rc)
		_ = insp.DeleteQueue(queue, true)
		// DeleteQueue leaves the hashes of the tasks asynq completed
		// (kept for their retention, without a TTL of their own). Left
		// behind, they grew the stack's Redis by about 50,000 keys a run,
		// and with them the AOF rewrites (a forked child writing the whole
		// dataset) that stalled later runs for seconds.
		_ = deleteKeys(context.WithoutCancel(ctx), rc, "asynq:{"+queue+"}:*")
	}()

	regStart := b.Now()
	from := regStart.Add(cfg.Lead).Truncate(time.Second)
	if plan.Herd() {
		from = plan.HerdAt
	}
	// Bootstrapping enqueues each job's first occurrence at or after the
	// window's start minus a warm-up as long as the lead, so the chains are
	// running when the window starts.
	warm := from.Add(-cfg.Lead / 2)
	plan.Start = from
	to := from.Add(plan.Duration)
	if plan.Herd() {
		to = from.Add(time.Millisecond)
	}
	peer.rec = loadgen.NewRecorder(plan.ParseRunID, from, to)
	b.say("asynq: %d workers, delayed-task check every %s, queue %s; enqueuing %d first occurrences", workers, check, queue, plan.Jobs)
	if err := srv.Start(mux); err != nil {
		return sys, fmt.Errorf("asynq server: %w", err)
	}
	defer srv.Shutdown()
	eg, egCtx := errgroup.WithContext(ctx)
	eg.SetLimit(32)
	var enq atomic.Int64
	for i := range plan.Jobs {
		eg.Go(func() error {
			due, ok := plan.NextDue(i, warm)
			if !ok {
				return nil
			}
			enq.Add(1)
			return peer.enqueue(egCtx, uint32(i), due)
		})
	}
	if err := eg.Wait(); err != nil {
		return sys, fmt.Errorf("asynq: enqueue: %w", err)
	}
	b.say("asynq: %d tasks enqueued in %.1fs", enq.Load(), b.Now().Sub(regStart).Seconds())
	if b.Now().After(warm) {
		b.say("asynq: warning: enqueuing took past the warm-up start; the first runs of the window may be late")
	}
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if b.Now().After(to.Add(cfg.Drain)) {
					return
				}
				p := peer.rec.Progress()
				if b.Progress != nil {
					_, _ = fmt.Fprintf(b.Progress, "asynq  runs started %d  rate %.0f/s  p95 %s\n", p.Started, float64(p.RecentStarted)/5, p.RecentP95.Round(100*time.Microsecond))
				}
			}
		}
	}()
	if !sleepUntil(ctx, to) {
		return sys, ctx.Err()
	}
	b.drain(ctx, cfg.Drain, peer.rec, plan, from, to)
	counts := peer.rec.Result(plan.Expected(from, to))
	hist := peer.rec.Trigger()
	sys.Trigger = Summarise(hist)
	sys.Counts = counts
	sys.Effects = ds.Effects()
	sys.Series = Series(peer.rec.Samples(), from)
	sys.hist = hist
	if plan.Herd() {
		if counts.Lost == 0 && counts.Expected > 0 {
			sys.HerdDrainSeconds = sys.Trigger.MaxMs / 1000
			sys.HerdDrainPerSec = float64(counts.Expected) / sys.HerdDrainSeconds
		}
	} else {
		sys.SustainedPerSec = float64(counts.StartedDuringWindow) / to.Sub(from).Seconds()
	}
	sys.Notes = append(sys.Notes, fmt.Sprintf("asynq v0.26.0 over the same Redis: each job a chain of ProcessAt tasks (TaskID = run id), %d workers, DelayedTaskCheckInterval %s; %d handler errors; no dispatch latency (asynq has no separate dispatch step)",
		workers, check, peer.errs.Load()))
	return sys, nil
}
