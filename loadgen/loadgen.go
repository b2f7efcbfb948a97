package loadgen

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/sundialhq/sundial/client"
	"github.com/sundialhq/sundial/internal/deps"
	"github.com/sundialhq/sundial/internal/lifecycle"
	"github.com/sundialhq/sundial/internal/startoffsets"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// Config configures a Generator.
type Config struct {
	// Kafka are the options of every Kafka client of the observer: the seed brokers
	// (kgo.SeedBrokers) and the connection's TLS and SASL, as
	// connect.Kafka.Options builds them from the command's flags. Required.
	Kafka []kgo.Opt
	// Topics names the installation's topics.
	Topics topics.Names
	// Plan is the workload. Required.
	Plan *Plan
	// Client produces the definitions and reads the registry's answers.
	// Required.
	Client *client.Client
	// Recorder receives the events and run records. Required.
	Recorder *Recorder
	// Concurrency bounds the deletes of Cleanup (16 per unit). Default 4;
	// Register streams (client.ApplyMany) and needs no bound.
	Concurrency int
	// ProgressEvery is the interval of the progress lines. Default 5s.
	ProgressEvery time.Duration
	// Progress receives the progress lines; nil prints none.
	Progress io.Writer
	// Logger; nil discards.
	Logger *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Validate reports every bad field.
func (c Config) Validate() error {
	var errs []error
	if len(c.Kafka) == 0 {
		errs = append(errs, errors.New("loadgen config: kafka: required (at least kgo.SeedBrokers)"))
	}
	if c.Plan == nil {
		errs = append(errs, errors.New("loadgen config: plan: required"))
	}
	if c.Client == nil {
		errs = append(errs, errors.New("loadgen config: client: required"))
	}
	if c.Recorder == nil {
		errs = append(errs, errors.New("loadgen config: recorder: required"))
	}
	if c.Concurrency < 0 || c.ProgressEvery < 0 {
		errs = append(errs, fmt.Errorf("loadgen config: concurrency %d, progress interval %s: must not be negative",
			c.Concurrency, c.ProgressEvery))
	}
	return errors.Join(errs...)
}

// Generator registers a workload's jobs through the Go client and observes
// what the pipeline does with them: it reads sundial.events (trigger
// latency, executions) and the run topics (dispatch latency: the run
// record's broker timestamp minus its due time) into the Recorder, and
// counts the registry's answers.
type Generator struct {
	cfg Config
	log *slog.Logger

	produced atomic.Int64
	accepted atomic.Int64
	rejected atomic.Int64
	deleted  atomic.Int64
	// logAppend counts run records whose timestamp the broker set
	// (LogAppendTime), the others carrying the producer's CreateTime.
	logAppend, createTime atomic.Int64

	mu        sync.Mutex
	answered  []bool // by job index: the registry accepted its definition
	rejection string // the first rejection, for the error

	life  lifecycle.Lifecycle
	start time.Time // set by Start, before the goroutines it starts
}

// New validates cfg.
func New(cfg Config) (*Generator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Concurrency = cmp.Or(cfg.Concurrency, 4)
	cfg.ProgressEvery = cmp.Or(cfg.ProgressEvery, 5*time.Second)
	cfg.Logger = deps.Logger(cfg.Logger)
	cfg.Now = deps.Clock(cfg.Now)
	return &Generator{cfg: cfg, log: cfg.Logger, answered: make([]bool, cfg.Plan.Jobs)}, nil
}

// Start begins observing: the event and run topics from now on (minus a
// margin for clock skew), the registry's answers, and the progress lines.
// It reads the partitions the topics have when it starts. ctx bounds the
// start only.
func (g *Generator) Start(ctx context.Context) error {
	if err := g.life.Start(ctx, g.startRun); err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	return nil
}

func (g *Generator) startRun(ctx context.Context, run *lifecycle.Run) error {
	g.start = g.cfg.Now()
	since := g.start.Add(-time.Minute)
	opts := append([]kgo.Opt{
		// Only for a reset after an offset out of range: the start
		// offsets are set below.
		kgo.ConsumeResetOffset(kgo.NewOffset().AfterMilli(since.UnixMilli())),
		// The observer reads times from the events, not from when it
		// fetched them: let the broker gather 64 KiB or 100 ms per fetch
		// rather than answer each record that lands, which costs the
		// broker CPU the pipeline under test would otherwise have.
		kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.FetchMinBytes(64 << 10),
		kgo.FetchMaxBytes(64 << 20),
	}, g.cfg.Kafka...)
	obs, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("observer: %w", err)
	}
	run.OnStop(obs.Close)
	// Each partition starts where startoffsets.Since says, not at kgo's
	// AfterMilli offset: in a partition with no record from since on, that
	// offset falls back on an end looked up after a record appended in the
	// meantime (an early run or event of the workload), which would never
	// be observed.
	adm := kadm.NewClient(obs)
	parts := map[string]map[int32]kgo.Offset{}
	for _, topic := range append([]string{g.cfg.Topics.Events()}, g.cfg.Topics.AllRuns()...) {
		starts, err := startoffsets.Since(ctx, adm, topic, since)
		if err != nil {
			return fmt.Errorf("observer: %w", err)
		}
		parts[topic] = map[int32]kgo.Offset{}
		for p, o := range starts {
			parts[topic][p] = kgo.NewOffset().At(o)
		}
	}
	obs.AddConsumePartitions(parts)
	run.Go(func(ctx context.Context) { g.observe(ctx, obs) })
	run.Go(func(ctx context.Context) { g.watchStatuses(ctx, since) })
	run.Go(g.progress)
	return nil
}

// Stop ends observing and waits for the goroutines. Safe before Start and
// more than once.
func (g *Generator) Stop() { g.life.Stop() }

func (g *Generator) observe(ctx context.Context, obs *kgo.Client) {
	events := g.cfg.Topics.Events()
	for {
		fetches := obs.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		fetches.EachError(func(t string, p int32, err error) {
			g.log.Warn("loadgen: fetch", "topic", t, "partition", p, "err", err)
		})
		fetches.EachRecord(func(rec *kgo.Record) {
			if rec.Topic == events {
				// The DAG engine's own events share the topic; they are
				// not run events.
				ev, ok, err := topics.DecodeRunEvent(rec)
				if err != nil {
					g.log.Warn("loadgen: event does not decode", "offset", rec.Offset, "err", err)
				}
				if ok {
					g.cfg.Recorder.ObserveEvent(ev)
				}
				return
			}
			run := &sundialv1.Run{}
			if err := sundialv1.Unmarshal(topics.Header(rec, sundialv1.HeaderContentType), rec.Value, run); err != nil {
				g.log.Warn("loadgen: run record does not decode", "topic", rec.Topic, "offset", rec.Offset, "err", err)
				return
			}
			if rec.Attrs.TimestampType() == 1 {
				g.logAppend.Add(1)
			} else {
				g.createTime.Add(1)
			}
			g.cfg.Recorder.ObserveDispatch(run, rec.Timestamp)
		})
	}
}

// watchStatuses counts the registry's answers to this workload's jobs.
func (g *Generator) watchStatuses(ctx context.Context, since time.Time) {
	prefix := g.cfg.Plan.idPrefix()
	for st, err := range g.cfg.Client.Statuses(ctx, since) {
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			g.log.Warn("loadgen: status", "err", err)
			continue
		}
		id := st.GetJobId()
		if !strings.HasPrefix(id, prefix) {
			continue
		}
		k, ok := g.cfg.Plan.ParseRunID(id + "@0")
		if !ok {
			continue
		}
		switch st.GetOutcome() {
		case sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED,
			sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UPDATED,
			sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UNCHANGED:
			g.mu.Lock()
			if !g.answered[k.Job] {
				g.answered[k.Job] = true
				g.accepted.Add(1)
			}
			g.mu.Unlock()
		case sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_DELETED:
			g.deleted.Add(1)
		case sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_REJECTED:
			g.rejected.Add(1)
			g.mu.Lock()
			if g.rejection == "" {
				g.rejection = fmt.Sprintf("job %s: %v", id, client.FieldErrors(st))
			}
			g.mu.Unlock()
		}
	}
}

func (g *Generator) progress(ctx context.Context) {
	if g.cfg.Progress == nil {
		return
	}
	t := time.NewTicker(g.cfg.ProgressEvery)
	defer t.Stop()
	last := g.cfg.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := g.cfg.Now()
		p := g.cfg.Recorder.Progress()
		rate := float64(p.RecentStarted) / now.Sub(last).Seconds()
		last = now
		_, _ = fmt.Fprintf(g.cfg.Progress, "%s  jobs produced %d registered %d/%d  events %d  runs started %d  rate %.0f/s  p95 %s\n",
			now.Sub(g.start).Truncate(time.Second), g.produced.Load(), g.accepted.Load(), g.cfg.Plan.Jobs,
			p.Events, p.Started, rate, p.RecentP95.Round(100*time.Microsecond))
	}
}

// Register applies the definitions of jobs [from, to) of the plan through
// the client's bulk call (client.ApplyMany), which streams them and returns
// once the registry answered every one, so the registration rate measured
// is the bulk path's. A rejection fails it, naming the first.
func (g *Generator) Register(ctx context.Context, from, to int) error {
	if from < 0 || to > g.cfg.Plan.Jobs || from > to {
		return fmt.Errorf("loadgen: register jobs [%d, %d): the plan has %d", from, to, g.cfg.Plan.Jobs)
	}
	specs := func(yield func(*sundialv1.JobSpec) bool) {
		for i := from; i < to; i++ {
			if !yield(g.cfg.Plan.Spec(i)) {
				return
			}
		}
	}
	sum, err := g.cfg.Client.ApplyMany(ctx, specs, client.ApplyOptions{
		OnProduced: func(client.Receipt) { g.produced.Add(1) },
	})
	if err != nil {
		return fmt.Errorf("loadgen: register jobs %d..%d: %w", from, to-1, err)
	}
	if sum.Rejected > 0 {
		first := sum.Rejections[0]
		return fmt.Errorf("loadgen: register jobs %d..%d: %d rejected, first %s: %w", from, to-1, sum.Rejected, first.ID, client.FieldErrors(first.Status))
	}
	return nil
}

// WaitAccepted waits until the registry accepted n definitions of the
// plan. It fails at the first rejection, or with ctx's error.
func (g *Generator) WaitAccepted(ctx context.Context, n int) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if g.rejected.Load() > 0 {
			g.mu.Lock()
			defer g.mu.Unlock()
			return fmt.Errorf("loadgen: the registry rejected %d definitions, first %s", g.rejected.Load(), g.rejection)
		}
		if g.accepted.Load() >= int64(n) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("loadgen: %d of %d definitions accepted: %w", g.accepted.Load(), n, ctx.Err())
		case <-t.C:
		}
	}
}

// Counters are the generator's own counts.
type Counters struct {
	Produced int64 `json:"produced"`
	Accepted int64 `json:"accepted"`
	Rejected int64 `json:"rejected"`
	Deleted  int64 `json:"deleted"`
	// RunRecordsLogAppendTime and RunRecordsCreateTime count the run records
	// by the kind of timestamp the dispatch latency was read from.
	RunRecordsLogAppendTime int64 `json:"run_records_log_append_time"`
	RunRecordsCreateTime    int64 `json:"run_records_create_time"`
}

// Counters returns the counts so far.
func (g *Generator) Counters() Counters {
	return Counters{
		Produced: g.produced.Load(), Accepted: g.accepted.Load(), Rejected: g.rejected.Load(), Deleted: g.deleted.Load(),
		RunRecordsLogAppendTime: g.logAppend.Load(), RunRecordsCreateTime: g.createTime.Load(),
	}
}

// Cleanup deletes every job of the plan with a tombstone, concurrency
// deletes at a time.
func (g *Generator) Cleanup(ctx context.Context) error {
	ids := make(chan string)
	// The group's context ends when the group does, so the answer below is
	// read from the caller's.
	eg, egCtx := errgroup.WithContext(ctx)
	egCtx = client.WithTeam(egCtx, g.cfg.Plan.Team) // a ByOwner client deletes on the team's topic
	var errs []error
	var mu sync.Mutex
	for range max(g.cfg.Concurrency*16, 1) {
		eg.Go(func() error {
			for id := range ids {
				if _, err := g.cfg.Client.Delete(egCtx, id); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
			return nil
		})
	}
	for i := range g.cfg.Plan.Jobs {
		select {
		case ids <- g.cfg.Plan.JobID(i):
		case <-egCtx.Done():
		}
		if egCtx.Err() != nil {
			break
		}
	}
	close(ids)
	_ = eg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("loadgen: cleanup: %d deletes failed, first: %w", len(errs), slices.Clone(errs)[0])
	}
	return ctx.Err()
}
