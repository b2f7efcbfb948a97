package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/sundialhq/sundial/internal/backoff"
	"github.com/sundialhq/sundial/internal/consume"
	"github.com/sundialhq/sundial/internal/lifecycle"
	"github.com/sundialhq/sundial/internal/tracing"
	"github.com/sundialhq/sundial/leasing"
	"github.com/sundialhq/sundial/logtail"
	"github.com/sundialhq/sundial/runner/breaker"
	"github.com/sundialhq/sundial/runner/egress"
	"github.com/sundialhq/sundial/runner/priority"
	"github.com/sundialhq/sundial/runner/target"
)

// errShutdown is the cause of executions cancelled by Stop.
var errShutdown = errors.New("runner: shutting down")

// errKilled is the cause of executions cut short by kill (tests of a crash).
var errKilled = errors.New("runner: killed")

// Runner consumes runs, executes them and reports their states. Several
// runners share the work through the consumer group.
type Runner struct {
	cfg      Config
	egress   *egress.Policy
	log      *slog.Logger
	m        *metrics
	breakers *breaker.Set
	targets  *target.Targets
	tracer   trace.Tracer

	consumer *kgo.Client
	producer *kgo.Client
	// leases sends the lease calls of all workers in shared pipelines.
	leases *leasing.Batcher
	// slots holds a token per run that holds a lease (Config.MaxInFlight):
	// a worker or router takes one before it takes a record; it gives it
	// back, or the record's finishing goroutine does (tails).
	slots chan struct{}
	// tails runs the finishing goroutines (finish.go).
	tails *finisher
	// pool holds the pool's slots (Config.PoolSlots, PoolBlocking).
	pool *poolGate
	// teamSlots are the team slots this runner holds, renewed together.
	teamSlots teamSlots
	// routes hands the runs that ask for an executor over to one, and
	// places handler runs (route.go, remote.go).
	routes *router
	// cancels sends and hears the replace signal (replace.go).
	cancels *cancelBoard
	// marks reads and writes the runs' markers in Redis (cancel.go).
	marks *markers

	// in holds the records fetched and not finished (backlog.go).
	in *backlog

	// commits commits the backlog's offsets (commits.go).
	commits *committer

	// logs ships the running attempts' log lines to their live tails.
	logs *logtail.Shipper

	life lifecycle.Lifecycle
	// stopExec cancels the executions of the current run (set by Start;
	// kill uses it).
	stopExec  context.CancelCauseFunc
	workersWG sync.WaitGroup
	bgWG      sync.WaitGroup
}

// New validates cfg and returns a Runner. It does no I/O.
func New(cfg Config) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	pol, err := egress.New(cfg.Egress)
	if err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	br, err := breaker.New(cfg.Breakers)
	if err != nil {
		return nil, err
	}
	q, err := priority.New[*record](cfg.Weights, cfg.Aging)
	if err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	r := &Runner{
		cfg:      cfg,
		egress:   pol,
		tracer:   tracing.Tracer(cfg.TracerProvider),
		leases:   leasing.NewBatcher(cfg.Leases, 0, 0),
		slots:    make(chan struct{}, cfg.MaxInFlight),
		pool:     newPoolGate(cfg.PoolBlocking, cfg.PoolSlots),
		log:      cfg.Logger.With("runner_id", cfg.ID),
		m:        m,
		breakers: br,
	}
	r.logs, err = logtail.NewShipper(logtail.ShipperConfig{Redis: cfg.Redis, KeyPrefix: cfg.KeyPrefix, Bounds: cfg.LogTail, Logger: r.log})
	if err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	r.cancels = newCancelBoard(cfg, r.log, m.inFlight)
	r.marks = &markers{cfg: &r.cfg, log: r.log}
	r.in = newBacklog(&r.cfg, r.log, m, q)
	r.commits = &committer{in: r.in, log: r.log, m: m, interval: cfg.CommitInterval}
	r.tails = &finisher{cfg: &r.cfg, log: r.log, in: r.in, slots: r.slots}
	r.routes = newRouter(&r.cfg, r.log, m, r.in, r.marks, r.tails)
	return r, nil
}

// Start joins the consumer group and starts the workers. It fails when a
// Kafka client cannot be created; it does not wait for an assignment. ctx
// bounds the start only. A stopped Runner may be started again: it begins
// with nothing queued, assigned or in flight, as a new process would.
func (r *Runner) Start(ctx context.Context) error {
	if err := r.life.Start(ctx, r.start); err != nil {
		return fmt.Errorf("runner: %w", err)
	}
	return nil
}

func (r *Runner) start(ctx context.Context, run *lifecycle.Run) error {
	if err := r.reset(); err != nil {
		return err
	}
	run.OnStop(func() {
		if r.targets != nil {
			r.targets.HTTP.CloseIdleConnections()
		}
		r.log.Info("runner stopped")
	})
	producer, err := kgo.NewClient(append(append([]kgo.Opt{kgo.ProducerLinger(eventLinger)}, r.cfg.Kafka...), r.cfg.ProducerKafka...)...)
	if err != nil {
		return fmt.Errorf("producer client: %w", err)
	}
	run.OnStop(producer.Close)
	if err := r.routes.start(ctx, run); err != nil {
		return err
	}
	consumer, err := kgo.NewClient(consumerOpts(&r.cfg, r.commits)...)
	if err != nil {
		return fmt.Errorf("consumer client: %w", err)
	}
	run.OnStop(func() { r.leave(consumer) })
	r.producer, r.consumer = producer, consumer
	r.in.consumer, r.commits.consumer = consumer, consumer
	r.routes.producer, r.routes.consumer = producer, consumer
	r.targets = &target.Targets{
		HTTP:     &target.HTTP{Egress: r.egress, Transport: r.cfg.HTTPTransport, Now: r.cfg.Now, Secrets: r.cfg.Secrets},
		Kafka:    &target.Kafka{Client: producer},
		Handlers: r.cfg.Handlers,
		Remote:   remoteHandler(r.cfg.Remote),
		Exec:     r.cfg.Exec,
		Egress:   r.egress,
	}

	r.startLoops(ctx, run)
	// Registered after drain, so it runs first: the tombstone tells
	// readers the runner is leaving while its last runs finish.
	if err := announce(ctx, run, &r.cfg, r.log, r.pool, r.routes.servedHandlers); err != nil {
		return err
	}
	r.log.Info("runner started", "group", r.cfg.Group, "topics", r.cfg.Topics.AllRuns(), "concurrency", r.cfg.Concurrency)
	return nil
}

// eventLinger is how long the runner's producer waits for more records
// before it sends a produce request: the events of every run ending within
// it share one request. It delays what waits for a run's events (its
// offset commit and dedupe mark, the DAG engine's next step, a Kafka
// target's acknowledgement) by at most this much, and no run's start. At
// 500 runs/s a linger of 2ms cost 0.25 produce requests a run, each about a
// millisecond of the broker's CPU (docs/architecture.md, "The work of one
// run").
const eventLinger = 20 * time.Millisecond

// consumerOpts are the options of the group consumer of the runner of
// cfg, whose partition changes commits hears.
func consumerOpts(cfg *Config, commits *committer) []kgo.Opt {
	// A resumed topic or partition is fetched again only when the fetch in
	// flight returns, which the broker may hold for FetchMaxWait when there
	// is no data: keep it short so a pause costs little. Config.Kafka comes
	// after and may override it.
	copts := append(append([]kgo.Opt{kgo.FetchMaxWait(200 * time.Millisecond)}, cfg.Kafka...), cfg.ConsumerKafka...)
	if cfg.InstanceID != "" {
		copts = append(copts, kgo.InstanceID(cfg.InstanceID))
	}
	return append(copts,
		kgo.ConsumerGroup(cfg.Group),
		// Every priority topic shared among the runners, not the sum of
		// their partitions (consume.PerTopicBalancer).
		consume.Balancers(),
		kgo.SessionTimeout(cfg.SessionTimeout),
		kgo.HeartbeatInterval(cfg.HeartbeatInterval),
		// Only this runner subscribes to its directed topic, so the group
		// assigns that topic's partitions to it alone.
		kgo.ConsumeTopics(consumedTopics(cfg)...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(commits.onAssigned),
		kgo.OnPartitionsRevoked(commits.onRevoked),
		kgo.OnPartitionsLost(commits.onLost),
	)
}

// consumedTopics are the topics the runner of cfg subscribes to: the runs
// topics and its directed topic, or its directed topic only
// (Config.DirectOnly).
func consumedTopics(cfg *Config) []string {
	if cfg.DirectOnly {
		return []string{cfg.Topics.Direct(cfg.ID)}
	}
	return append(cfg.Topics.AllRuns(), cfg.Topics.Direct(cfg.ID))
}

// startLoops starts the goroutines of a run of the Runner: the poll loop,
// the workers, the routers and the background loops. The poll loop ends with
// the run's context; workers, executions and the background loops each have
// a context of their own, ended one after the other by drain.
func (r *Runner) startLoops(ctx context.Context, run *lifecycle.Run) {
	base := context.WithoutCancel(ctx)
	workCtx, stopWork := context.WithCancel(base)
	execCtx, stopExec := context.WithCancelCause(base)
	bgCtx, bgStop := context.WithCancel(base)
	r.stopExec = stopExec
	run.OnStop(func() { r.drain(stopWork, stopExec, bgStop) })

	run.Go(r.poll)
	for range r.cfg.Concurrency {
		r.workersWG.Go(func() { r.work(workCtx, execCtx) })
	}
	exec := func(rec *record) *execution { return newExecution(r, rec, rec.run) }
	for range routers {
		r.workersWG.Go(func() { r.routes.loop(workCtx, execCtx, r.slots, exec) })
	}
	r.bgWG.Go(func() { r.commits.loop(bgCtx) })
	if r.cfg.TeamQuotas != nil {
		r.bgWG.Go(func() { r.teamSlots.renewLoop(bgCtx, r.cfg.Leases, r.log) })
	}
	r.bgWG.Go(func() { r.routes.adoptLoop(bgCtx) })
	// Ended with the executions, so that its last write carries the ends
	// of the attempts that finished during the drain.
	r.bgWG.Go(func() { r.logs.Run(bgCtx) })
	sub := r.cancels.subscribe(bgCtx)
	r.bgWG.Go(func() { r.cancels.listen(bgCtx, sub) })
}

// reset gives a new run fresh state: what an earlier run fetched, queued or
// paused belongs to a group membership that has ended.
func (r *Runner) reset() error {
	q, err := priority.New[*record](r.cfg.Weights, r.cfg.Aging)
	if err != nil {
		return err
	}
	r.in.reset(q)
	r.cancels.reset()
	r.slots = make(chan struct{}, r.cfg.MaxInFlight)
	r.tails.slots = r.slots
	r.pool = newPoolGate(r.cfg.PoolBlocking, r.cfg.PoolSlots)
	r.routes.queue = make(chan *record, r.cfg.QueueCapacity)
	return nil
}

// Stop stops fetching, lets executing runs finish for up to
// Config.ShutdownTimeout (then cancels them: they are released and
// redelivered), commits what finished, and leaves the group. Runs fetched but
// not started are not committed and are redelivered. Stop is idempotent,
// safe before Start, and returns once every goroutine of the run has exited.
func (r *Runner) Stop() { r.life.Stop() }

// drain runs in Stop once the poll loop has exited: it stops the workers,
// waits for executions up to ShutdownTimeout, ends the background loops and
// commits what finished. The clients are closed after it.
func (r *Runner) drain(stopWork context.CancelFunc, stopExec context.CancelCauseFunc, bgStop context.CancelFunc) {
	stopWork()
	idle := make(chan struct{})
	go func() {
		r.workersWG.Wait()
		r.tails.wait()
		close(idle)
	}()
	t := time.NewTimer(r.cfg.ShutdownTimeout)
	select {
	case <-idle:
	case <-t.C:
		r.log.Warn("shutdown timeout: cancelling executing runs", "timeout", r.cfg.ShutdownTimeout)
		stopExec(errShutdown)
		<-idle
	}
	t.Stop()
	stopExec(errShutdown)
	bgStop()
	r.bgWG.Wait()
	if !r.isKilled() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		r.commits.commit(ctx)
		cancel()
	}
}

// leave ends the runner's membership of the group and closes consumer. A
// static member leaves too, since a stop is not a crash
// (consume.LeaveStatic); a killed runner sends nothing, as a crash would.
func (r *Runner) leave(consumer *kgo.Client) {
	if r.isKilled() {
		consumer.Close()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.SessionTimeout)
	defer cancel()
	if err := consume.LeaveStatic(ctx, consumer, r.cfg.Group, r.cfg.InstanceID); err != nil {
		r.log.Warn("leaving the group failed; the group drops this runner after the session timeout", "err", err)
	}
}

// kill simulates a crash for tests: executions are cut short without
// releasing leases, emitting events or enqueueing anything, nothing more is
// committed, and the clients are closed. Stop afterwards only reaps the
// goroutines.
func (r *Runner) kill() {
	r.in.kill()
	r.stopExec(errKilled)
	r.consumer.Close()
	r.producer.Close()
}

func (r *Runner) isKilled() bool { return r.in.killed.Load() }

// poll fetches records into the priority queues until ctx ends. The
// rebalance is blocked from the return of a poll until its records are
// tracked, so a revocation always sees every record of the partition.
func (r *Runner) poll(ctx context.Context) {
	for {
		fs := r.consumer.PollRecords(ctx, r.cfg.QueueCapacity)
		if fs.IsClientClosed() || ctx.Err() != nil {
			r.consumer.AllowRebalance()
			return
		}
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				r.log.Warn("fetch error", "topic", topic, "partition", p, "err", err)
			}
		})
		// Decoded outside the lock the workers take: the team is the
		// record's lane, and process uses the decoded run.
		var fetched []*record
		received := r.cfg.Now()
		fs.EachRecord(func(rec *kgo.Record) {
			fetched = append(fetched, decodeFetched(rec, received))
		})
		toRoute, queued := r.in.add(fetched, r.routes.levelOf, r.routes.needsRoute)
		r.consumer.AllowRebalance()
		for _, fr := range toRoute {
			select {
			case r.routes.queue <- fr:
			case <-ctx.Done():
				return
			}
		}
		if queued > 0 {
			r.in.wake()
		}
	}
}

// work is one worker: it takes records until workCtx ends, and executes each
// under execCtx. It takes an in-flight slot before each record, which the
// record's finishing goroutine gives back when the worker hands the record
// over, and a pool slot for the execution (see poolGate).
func (r *Runner) work(workCtx, execCtx context.Context) {
	for {
		select {
		case r.slots <- struct{}{}:
		case <-workCtx.Done():
			return
		}
		if !r.pool.reserve(workCtx) {
			<-r.slots
			return
		}
		rec := r.in.next(workCtx)
		if rec == nil {
			r.pool.unreserve()
			<-r.slots
			return
		}
		admitted := r.pool.admit()
		handedOff := r.handleRecord(workCtx, execCtx, rec, !admitted)
		if admitted {
			r.pool.leave()
		}
		if !handedOff {
			<-r.slots
		}
	}
}

// maxRecordRetry caps the wait between two tries of a record whose outcome
// could not be made durable.
const maxRecordRetry = 5 * time.Second

// handleRecord processes rec until its outcome is durable, then finishes it.
// poolBusy says the record found every pool slot busy under
// BlockingDiscard: it is discarded (admit).
// A try that ends unfinished while the runner keeps the partition (the
// lease stopped being trusted before the execution could start, an event
// was not acknowledged) is tried again here after a backoff: no one else
// delivers the record while this runner owns its partition, so giving up
// would lose the run and pin the partition's watermark until the next
// rebalance. Trying again is what a redelivery would do; the dedupe mark and
// the idempotency key absorb a repeated effect. It gives up when the runner
// stops, is killed, or loses the partition: the record is then delivered
// again to the partition's next owner. It reports whether a finishing
// goroutine took the record over (a success whose outcome is being
// written).
func (r *Runner) handleRecord(workCtx, execCtx context.Context, rec *record, poolBusy bool) bool {
	retry := backoff.New(r.cfg.HeldRetry, maxRecordRetry)
	for {
		switch r.process(execCtx, rec, poolBusy) {
		case finished:
			r.in.finish(rec)
			return false
		case handedOff:
			return true
		}
		if workCtx.Err() != nil || execCtx.Err() != nil || !r.in.owns(rec) {
			return false
		}
		r.log.Warn("run not finished; trying the record again", "topic", rec.tp.topic, "partition", rec.tp.partition,
			"offset", rec.rec.Offset, "retry_within", retry.Peek())
		if !retry.Wait(workCtx) {
			return false
		}
	}
}

// Egress is the egress policy the runner applies, for the start-up log.
func (r *Runner) Egress() *egress.Policy { return r.egress }
