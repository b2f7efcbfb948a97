package history

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/sundialhq/sundial/internal/backoff"
	"github.com/sundialhq/sundial/internal/deps"
	"github.com/sundialhq/sundial/internal/deps/metricdeps"
	"github.com/sundialhq/sundial/internal/lifecycle"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// Defaults of Config.
const (
	DefaultGroup       = "sundial-history"
	DefaultConcurrency = 16
)

// Config configures a Writer.
type Config struct {
	// Kafka are the base client options (seed brokers, TLS, SASL). Required.
	Kafka []kgo.Opt
	// Topics names sundial.events.
	Topics topics.Names
	// Group is the consumer group of the history writers. Default
	// DefaultGroup.
	Group string
	// History stores the records. Required.
	History store.History
	// Concurrency bounds the RecordRun calls in flight. Default 16.
	Concurrency int
	// Registerer receives the writer's metrics (see metrics.go). Nil:
	// none kept.
	Registerer prometheus.Registerer
	// Logger; nil discards.
	Logger *slog.Logger
	// Now is the clock of the lag metric; default time.Now.
	Now func() time.Time
}

// Validate reports every invalid field.
func (c Config) Validate() error {
	var errs []error
	if len(c.Kafka) == 0 {
		errs = append(errs, errors.New("history config: Kafka: is required (at least kgo.SeedBrokers)"))
	}
	if c.History == nil {
		errs = append(errs, errors.New("history config: History: is required"))
	}
	if c.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("history config: Concurrency: %d is negative", c.Concurrency))
	}
	return errors.Join(errs...)
}

// Writer stores run events as history.
type Writer struct {
	cfg Config
	log *slog.Logger
	m   *metrics

	life lifecycle.Lifecycle
}

// New validates cfg.
func New(cfg Config) (*Writer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Group = cmp.Or(cfg.Group, DefaultGroup)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, DefaultConcurrency)
	cfg.Logger = deps.Logger(cfg.Logger)
	cfg.Registerer = metricdeps.Registerer(cfg.Registerer)
	cfg.Now = deps.Clock(cfg.Now)
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Writer{cfg: cfg, log: cfg.Logger, m: m}, nil
}

// Start joins the group and starts writing. ctx bounds the start only. A
// stopped Writer may be started again.
func (w *Writer) Start(ctx context.Context) error {
	if err := w.life.Start(ctx, w.start); err != nil {
		return fmt.Errorf("history: %w", err)
	}
	return nil
}

func (w *Writer) start(_ context.Context, run *lifecycle.Run) error {
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, w.cfg.Kafka...),
		kgo.ConsumerGroup(w.cfg.Group),
		kgo.ConsumeTopics(w.cfg.Topics.Events()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
	)...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	run.OnStop(cl.Close)
	run.Go(func(ctx context.Context) { w.run(ctx, cl) })
	return nil
}

// Stop stops consuming, waits for the loop and leaves the group. Idempotent,
// safe before Start.
func (w *Writer) Stop() { w.life.Stop() }

func (w *Writer) run(ctx context.Context, cl *kgo.Client) {
	for {
		fs := cl.PollFetches(ctx)
		if fs.IsClientClosed() || ctx.Err() != nil {
			cl.AllowRebalance()
			return
		}
		fs.EachError(func(t string, p int32, err error) {
			w.log.Warn("history: fetch error", "topic", t, "partition", p, "err", err)
		})
		if err := w.store(ctx, fs.Records()); err != nil {
			cl.AllowRebalance()
			return // only when ctx ended: nothing of this poll is committed
		}
		if err := cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn("history: commit failed; events will be applied again", "err", err)
		}
		cl.AllowRebalance()
	}
}

// store writes the records of every event, retrying failed writes until ctx
// ends.
func (w *Writer) store(ctx context.Context, recs []*kgo.Record) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(w.cfg.Concurrency)
	for _, rec := range recs {
		if kind := header(rec, sundialv1.HeaderKind); kind != "" && kind != sundialv1.KindRunEvent {
			continue
		}
		ev := &sundialv1.RunEvent{}
		if err := sundialv1.Unmarshal(header(rec, sundialv1.HeaderContentType), rec.Value, ev); err != nil {
			w.m.events.WithLabelValues(eventMalformed).Inc()
			w.log.Error("history: skipping an undecodable event", "partition", rec.Partition, "offset", rec.Offset, "err", err)
			continue
		}
		w.m.events.WithLabelValues(eventDecoded).Inc()
		for _, r := range Records(ev) {
			if err := r.Validate(); err != nil {
				w.m.records.WithLabelValues(resultInvalid).Inc()
				w.log.Error("history: skipping an invalid event", "job_id", ev.GetJobId(), "run_id", ev.GetRunId(), "err", err)
				continue
			}
			g.Go(func() error { return w.record(gctx, r) })
		}
	}
	return g.Wait()
}

func (w *Writer) record(ctx context.Context, r store.RunRecord) error {
	b := backoff.New(50*time.Millisecond, 5*time.Second)
	for {
		err := w.cfg.History.RecordRun(ctx, r)
		if err == nil {
			w.m.records.WithLabelValues(resultStored).Inc()
			if !r.UpdatedAt.IsZero() {
				w.m.lag.Observe(max(w.cfg.Now().Sub(r.UpdatedAt).Seconds(), 0))
			}
			return nil
		}
		if errors.Is(err, store.ErrInvalid) {
			w.m.records.WithLabelValues(resultRefused).Inc()
			w.log.Error("history: record refused", "job_id", r.JobID, "run_id", r.RunID, "err", err)
			return nil
		}
		w.m.retries.Inc()
		w.log.Warn("history: record failed; retrying", "job_id", r.JobID, "run_id", r.RunID, "err", err)
		if !b.Wait(ctx) {
			return ctx.Err()
		}
	}
}

func header(rec *kgo.Record, key string) string {
	for _, h := range rec.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
