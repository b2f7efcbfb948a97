package gateway

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sundialhq/sundial/checkpoint"
	"github.com/sundialhq/sundial/discovery"
	"github.com/sundialhq/sundial/internal/deps"
	"github.com/sundialhq/sundial/jobspec"
	"github.com/sundialhq/sundial/logtail"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/target"
)

// Defaults of Config.
const (
	DefaultHeartbeatInterval = 2 * time.Second
	DefaultLostAfter         = 3
	DefaultMaxWait           = 20 * time.Second
	// CodeWorkerLost is the code of an attempt whose worker stopped
	// heartbeating: retryable, so another worker of the team redoes it.
	CodeWorkerLost = "worker_lost"
)

// Config configures a Broker.
type Config struct {
	// HeartbeatInterval is how often a worker heartbeats each task it
	// holds (told in every Poll answer). Default DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	// LostAfter is how many heartbeat intervals of silence lose a worker:
	// its task fails as CodeWorkerLost (retryable), and it stops counting
	// as serving its handlers once it neither polls nor heartbeats for as
	// long. Default DefaultLostAfter.
	LostAfter int
	// MaxWait bounds a Poll's wait. Default DefaultMaxWait.
	MaxWait time.Duration
	// Logger logs; nil discards.
	Logger *slog.Logger
	// Now is the clock of heartbeats and liveness. Default time.Now.
	Now func() time.Time
	// Registerer receives the gateway's metrics (sundial_gateway_*). Nil
	// registers nothing.
	Registerer prometheus.Registerer
	// LogTail bounds the live tails of the workers' attempts: the
	// gateway's runner ships them with these bounds (assemble.Gateway sets
	// its runner.Config.LogTail from them), and every Poll answer tells
	// them to the workers, which bound what they send by the same rule.
	// Zero fields are logtail's defaults.
	LogTail logtail.Bounds
}

func (c Config) withDefaults() Config {
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, DefaultHeartbeatInterval)
	c.LostAfter = cmp.Or(c.LostAfter, DefaultLostAfter)
	c.MaxWait = cmp.Or(c.MaxWait, DefaultMaxWait)
	c.Logger = deps.Logger(c.Logger)
	c.Now = deps.Clock(c.Now)
	c.LogTail = c.LogTail.WithDefaults()
	return c
}

// Validate reports every bad field, after defaults.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.HeartbeatInterval <= 0 {
		errs = append(errs, fmt.Errorf("gateway config: HeartbeatInterval: %s is not positive", c.HeartbeatInterval))
	}
	if c.LostAfter < 1 {
		errs = append(errs, fmt.Errorf("gateway config: LostAfter: %d is below 1", c.LostAfter))
	}
	if c.MaxWait <= 0 {
		errs = append(errs, fmt.Errorf("gateway config: MaxWait: %s is not positive", c.MaxWait))
	}
	if err := c.LogTail.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("gateway config: LogTail: %w", err))
	}
	return errors.Join(errs...)
}

// key is a queue: one team's attempts of one handler, for the jobs of one
// pool.
type key struct{ team, pool, handler string }

// Outcome is how a worker ended a task.
type Outcome struct {
	// Err is nil for a success; a *target.Error otherwise.
	Err error
	// Suspend says the handler stopped after a checkpoint the gateway
	// answered suspended.
	Suspend bool
	// Lines are the attempt's log lines, its final log.
	Lines []string
	// Live, when set, says the worker sent the attempt's earlier lines to
	// its live tail (appendLog): it holds the lines logged since, for the
	// tail, and Lines are kept for the final log only. Nil: Lines go to
	// the tail too.
	Live *Live
}

// Live is a piece of an attempt's log a worker sends its live tail: the
// lines, and how many it left out over the bounds.
type Live struct {
	Lines   []string
	Dropped int64
}

// Task is one attempt waiting for, or held by, a worker.
type Task struct {
	Token   string
	Team    string
	Pool    string
	Handler string
	Req     target.Request
	// Checkpoints is the attempt's checkpoint session (nil without a
	// store).
	Checkpoints *checkpoint.Session
	Deadline    time.Time

	// Guarded by the Broker's mu.
	queued   time.Time
	worker   string
	taken    bool
	lastBeat time.Time
	stop     string // why the attempt must stop, once it must
	done     chan Outcome
	ended    bool
}

// worker is what the broker knows of a polling worker.
type worker struct {
	pool     string
	handlers []string
	seen     time.Time
	polling  int
}

// Broker holds the attempts the gateway's runner gives to workers, in one
// queue per (team, pool, handler), and the workers that poll for them. It is the
// runner's Remote (runner.Remote) and the state of the WorkerService. Safe
// for concurrent use.
type Broker struct {
	cfg Config
	m   *metrics

	mu      sync.Mutex
	queues  map[key][]*Task
	tasks   map[string]*Task
	workers map[key]*worker // key.handler holds the worker id, key.pool is empty
	// wake is closed, and replaced, when a task is queued.
	wake chan struct{}
}

// New returns a Broker, or cfg's errors.
func New(cfg Config) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := &Broker{cfg: cfg.withDefaults(), queues: map[key][]*Task{}, tasks: map[string]*Task{},
		workers: map[key]*worker{}, wake: make(chan struct{})}
	m, err := newMetrics(cfg.Registerer, b)
	if err != nil {
		return nil, err
	}
	b.m = m
	return b, nil
}

// HeartbeatInterval is how often workers heartbeat their tasks.
func (b *Broker) HeartbeatInterval() time.Duration { return b.cfg.HeartbeatInterval }

// LogTail is the bounds of the workers' live tails (Config.LogTail, with
// its defaults).
func (b *Broker) LogTail() logtail.Bounds { return b.cfg.LogTail }

func (b *Broker) lostAfter() time.Duration {
	return time.Duration(b.cfg.LostAfter) * b.cfg.HeartbeatInterval
}

// live reports whether w counts as connected at now: polling, or seen
// within lostAfter. Called with mu held.
func (b *Broker) live(w *worker, now time.Time) bool {
	return w.polling > 0 || now.Sub(w.seen) < b.lostAfter()
}

// Serves reports whether a live worker of team in pool serves handler.
func (b *Broker) Serves(pool, team, handler string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.cfg.Now()
	for k, w := range b.workers {
		if k.team == team && w.pool == pool && slices.Contains(w.handlers, handler) && b.live(w, now) {
			return true
		}
	}
	return false
}

// Served lists the (team, handler, pool) triples live workers serve, sorted, and
// forgets the workers that are no longer live.
func (b *Broker) Served() []discovery.ServedHandler {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.cfg.Now()
	seen := map[discovery.ServedHandler]bool{}
	for k, w := range b.workers {
		if !b.live(w, now) {
			delete(b.workers, k)
			continue
		}
		for _, h := range w.handlers {
			seen[discovery.ServedHandler{Team: k.team, Name: h, Pool: w.pool}] = true
		}
	}
	out := make([]discovery.ServedHandler, 0, len(seen))
	for h := range seen {
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b discovery.ServedHandler) int {
		return cmp.Or(cmp.Compare(a.Team, b.Team), cmp.Compare(a.Pool, b.Pool), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// Handle is the target.Handler form of HandleAttempt.
func (b *Broker) Handle(ctx context.Context, run *sundialv1.Run) error {
	return b.HandleAttempt(ctx, target.Request{Run: run})
}

// HandleAttempt queues the attempt for a worker of the run's owner team
// and of its job's pool that serves its handler, and waits for its outcome. It returns when the
// worker completes the task; when ctx ends (the job's timeout, the lease
// lost, a cancel: the worker is told at its next heartbeat, and its late
// outcome is ignored); or when the worker that took the task stops
// heartbeating for LostAfter intervals, or no live worker is left to take
// it: a retryable failure, CodeWorkerLost.
func (b *Broker) HandleAttempt(ctx context.Context, req target.Request) error {
	run := req.Run
	t := &Task{
		Token: newToken(), Team: run.GetOwnerTeam(), Pool: jobspec.PoolOf(run.GetPool()), Handler: run.GetTarget().GetHandler().GetName(), Req: req,
		Checkpoints: checkpoint.FromContext(ctx), done: make(chan Outcome, 1),
	}
	if d, ok := ctx.Deadline(); ok {
		t.Deadline = d
	}
	if t.Checkpoints != nil {
		// Loaded here, by the runner's worker of this attempt, rather than
		// in the Poll that hands the task out: a Poll of many tasks would
		// read their checkpoints one after the other. The session keeps
		// it; a failed load is tried again by the Poll.
		_, _, _ = t.Checkpoints.Last(ctx)
	}
	b.enqueue(t)
	tick := time.NewTicker(b.cfg.HeartbeatInterval)
	defer tick.Stop()
	for {
		select {
		case out := <-t.done:
			return b.outcome(req, out)
		case <-ctx.Done():
			b.end(t, "cancelled")
			return context.Cause(ctx)
		case <-tick.C:
			if reason := b.lost(t); reason != "" {
				b.cfg.Logger.Warn("worker lost; the attempt fails and is retried", "run_id", run.GetRunId(), "team", t.Team, "pool", t.Pool, "handler", t.Handler, "reason", reason)
				b.end(t, CodeWorkerLost)
				b.m.lost.WithLabelValues(t.Team).Inc()
				return target.Fail(CodeWorkerLost, true, errors.New(reason))
			}
		}
	}
}

// outcome turns a worker's outcome into the attempt's result, its lines
// into the attempt's output: to its live tail too, unless the worker sent
// the tail the earlier ones as it ran, and then only the rest of them.
func (b *Broker) outcome(req target.Request, out Outcome) error {
	switch {
	case req.Output == nil:
	case out.Live != nil:
		req.Output.Live(out.Live.Lines, out.Live.Dropped)
		req.Output.Keep(out.Lines)
	default:
		for _, l := range out.Lines {
			req.Output.Append(l)
		}
	}
	if out.Suspend {
		return checkpoint.ErrSuspended
	}
	return out.Err
}

func (b *Broker) enqueue(t *Task) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := key{t.Team, t.Pool, t.Handler}
	t.queued = b.cfg.Now()
	b.queues[k] = append(b.queues[k], t)
	b.tasks[t.Token] = t
	close(b.wake)
	b.wake = make(chan struct{})
}

// end forgets t, noting why its attempt stopped for the worker's next
// heartbeat.
func (b *Broker) end(t *Task, reason string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t.ended = true
	t.stop = reason
	if !t.taken {
		k := key{t.Team, t.Pool, t.Handler}
		b.queues[k] = slices.DeleteFunc(b.queues[k], func(x *Task) bool { return x == t })
		if len(b.queues[k]) == 0 {
			delete(b.queues, k)
		}
		delete(b.tasks, t.Token)
		return
	}
	// Kept a little so that the worker's next heartbeat learns it must
	// stop; forgotten after the worker would be lost anyway.
	time.AfterFunc(2*b.lostAfter(), func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		delete(b.tasks, t.Token)
	})
}

// lost says why t's worker counts as lost: the worker that took it stopped
// heartbeating, or, while nobody took it, no live worker serves it any
// more. Empty while neither.
func (b *Broker) lost(t *Task) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.cfg.Now()
	if t.taken {
		if now.Sub(t.lastBeat) >= b.lostAfter() {
			return fmt.Sprintf("worker %s sent no heartbeat for %s", t.worker, now.Sub(t.lastBeat).Round(time.Millisecond))
		}
		return ""
	}
	for k, w := range b.workers {
		if k.team == t.Team && w.pool == t.Pool && slices.Contains(w.handlers, t.Handler) && b.live(w, now) {
			return ""
		}
	}
	return "no live worker of the team serves the handler in pool " + t.Pool + " any more"
}

// poll takes up to max queued tasks of team's jobs of pool for the
// handlers, waiting up to wait for one. It registers the worker as serving
// the handlers in pool while it polls.
func (b *Broker) poll(ctx context.Context, team, pool, workerID string, handlers []string, max int, wait time.Duration) []*Task {
	wait = min(cmp.Or(wait, b.cfg.MaxWait), b.cfg.MaxWait)
	max = cmp.Or(max, 1)
	wk := key{team: team, handler: workerID}
	b.mu.Lock()
	w := b.workers[wk]
	if w == nil {
		w = &worker{}
		b.workers[wk] = w
	}
	w.pool, w.handlers = pool, slices.Clone(handlers)
	w.polling++
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		w.polling--
		w.seen = b.cfg.Now()
		b.mu.Unlock()
	}()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	began := b.cfg.Now()
	for {
		b.mu.Lock()
		got := b.take(team, pool, workerID, handlers, max)
		wake := b.wake
		b.mu.Unlock()
		if len(got) > 0 {
			b.m.pollWait.WithLabelValues(pollTasks).Observe(b.cfg.Now().Sub(began).Seconds())
			return got
		}
		select {
		case <-wake:
		case <-timer.C:
			b.m.pollWait.WithLabelValues(pollEmpty).Observe(b.cfg.Now().Sub(began).Seconds())
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// take removes up to max tasks of team's queues of pool for handlers,
// oldest queue head first, and marks them taken by workerID. Called with
// mu held.
func (b *Broker) take(team, pool, workerID string, handlers []string, max int) []*Task {
	var got []*Task
	now := b.cfg.Now()
	for len(got) < max {
		var best *Task
		var bestKey key
		for _, h := range handlers {
			k := key{team, pool, h}
			if q := b.queues[k]; len(q) > 0 && (best == nil || q[0].Req.Run.GetAttemptDueTime().AsTime().Before(best.Req.Run.GetAttemptDueTime().AsTime())) {
				best, bestKey = q[0], k
			}
		}
		if best == nil {
			return got
		}
		b.queues[bestKey] = b.queues[bestKey][1:]
		if len(b.queues[bestKey]) == 0 {
			delete(b.queues, bestKey)
		}
		best.taken, best.worker, best.lastBeat = true, workerID, now
		b.m.queueWait.Observe(now.Sub(best.queued).Seconds())
		got = append(got, best)
	}
	return got
}

// ErrUnknownTask answers a task token that is not a live task of the
// caller's team: unknown, ended long ago, or another team's (which it
// does not tell apart).
var ErrUnknownTask = errors.New("gateway: no such task")

// task returns team's taken task of token.
func (b *Broker) task(team, token string) (*Task, error) {
	t := b.tasks[token]
	if t == nil || t.Team != team || !t.taken {
		return nil, ErrUnknownTask
	}
	return t, nil
}

// Beat is the answer to a heartbeat.
type Beat struct {
	// Stop is why the attempt must stop; empty while it goes on.
	Stop string
}

// heartbeat records that token's worker is alive, and tells whether its
// attempt must stop.
func (b *Broker) heartbeat(team, token string) (*Task, Beat, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, err := b.task(team, token)
	if err != nil {
		return nil, Beat{}, err
	}
	now := b.cfg.Now()
	t.lastBeat = now
	if w := b.workers[key{team: team, handler: t.worker}]; w != nil {
		w.seen = now
	}
	return t, Beat{Stop: t.stop}, nil
}

// appendLog hands the lines a worker sent of token's attempt to its live
// tail, which bounds them. Only the worker a task of team was given to
// may, and only until the attempt ends: anything else is ErrUnknownTask,
// whatever the reason, so the answer tells nothing of another team's or
// another worker's task.
func (b *Broker) appendLog(team, workerID, token string, live Live) error {
	b.mu.Lock()
	t, err := b.task(team, token)
	if err == nil && (t.ended || t.worker != workerID) {
		err = ErrUnknownTask
	}
	b.mu.Unlock()
	if err != nil {
		return err
	}
	// Outside the broker's lock: the lines are cut and bounded one by one.
	// An attempt that ends meanwhile closes its tail, which then ignores
	// them.
	if t.Req.Output != nil {
		t.Req.Output.Live(live.Lines, live.Dropped)
	}
	return nil
}

// complete hands the outcome to the waiting attempt. It reports stale
// when the attempt had already ended.
func (b *Broker) complete(team, token string, out Outcome) (stale bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, err := b.task(team, token)
	if err != nil {
		return false, err
	}
	delete(b.tasks, token)
	if t.ended {
		b.m.completes.WithLabelValues(completeStale).Inc()
		return true, nil
	}
	t.ended = true
	t.done <- out
	switch {
	case out.Suspend:
		b.m.completes.WithLabelValues(completeSuspend).Inc()
	case out.Err != nil:
		b.m.completes.WithLabelValues(completeFailure).Inc()
	default:
		b.m.completes.WithLabelValues(completeSuccess).Inc()
	}
	return false, nil
}

func newToken() string {
	var b [18]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported systems
	return hex.EncodeToString(b[:])
}
