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

	"github.com/sundialhq/sundial/internal/backoff"
	"github.com/sundialhq/sundial/internal/deps"
	"github.com/sundialhq/sundial/internal/deps/metricdeps"
	"github.com/sundialhq/sundial/internal/lifecycle"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/store"
)

// Defaults of Config.
const (
	DefaultGroup          = "sundial-history"
	DefaultMaxPollRecords = 10000
	DefaultGather         = time.Second
)

// fetchMinBytes and fetchMaxWait make the broker hold the Writer's fetches
// until 64 KiB of events are there or 100 ms have passed. With Kafka's
// default of one byte, a consumer of a topic written a few records at a time
// asks again as soon as any record lands: at 1,000 runs/s that is hundreds of
// fetch requests a second, each costing the broker more than the records it
// returns. The Writer gathers for a second anyway (Config.Gather), so the
// wait costs it nothing. Config.Kafka comes after and may override both.
const (
	fetchMinBytes = 64 << 10
	fetchMaxWait  = 100 * time.Millisecond
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
	// MaxPollRecords bounds the events of one poll, which are coalesced
	// and written together: the most a poll holds in memory. Default
	// 10,000.
	MaxPollRecords int
	// Gather is how long the writer keeps polling after a poll that
	// returned events, before it writes what it has (sooner when it
	// holds MaxPollRecords): a run's STARTED and its outcome, produced
	// moments apart, then fall in one write and are coalesced into one
	// row. History lags by up to this much more. Default 1 s; negative:
	// write each poll as it comes.
	Gather time.Duration
	// Registerer receives the writer's metrics (see metrics.go). Nil:
	// none kept.
	Registerer prometheus.Registerer
	// Logger; nil discards.
	Logger *slog.Logger
	// Now is the clock of the lag metrics; default time.Now.
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
	if c.MaxPollRecords < 0 {
		errs = append(errs, fmt.Errorf("history config: MaxPollRecords: %d is negative", c.MaxPollRecords))
	}
	return errors.Join(errs...)
}

// Writer stores run events as history.
type Writer struct {
	cfg Config
	log *slog.Logger
	m   *metrics
	lag *lag

	life lifecycle.Lifecycle
}

// New validates cfg.
func New(cfg Config) (*Writer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Group = cmp.Or(cfg.Group, cfg.Topics.Group(DefaultGroup))
	cfg.MaxPollRecords = cmp.Or(cfg.MaxPollRecords, DefaultMaxPollRecords)
	cfg.Gather = cmp.Or(cfg.Gather, DefaultGather)
	cfg.Logger = deps.Logger(cfg.Logger)
	cfg.Registerer = metricdeps.Registerer(cfg.Registerer)
	cfg.Now = deps.Clock(cfg.Now)
	w := &Writer{cfg: cfg, log: cfg.Logger, lag: newLag()}
	m, err := newMetrics(cfg.Registerer, w.lag, cfg.Now)
	if err != nil {
		return nil, err
	}
	w.m = m
	return w, nil
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
	w.lag.reset()
	cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.FetchMinBytes(fetchMinBytes), kgo.FetchMaxWait(fetchMaxWait)}, w.cfg.Kafka...),
		kgo.ConsumerGroup(w.cfg.Group),
		kgo.ConsumeTopics(w.cfg.Topics.Events()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsRevoked(w.forget),
		kgo.OnPartitionsLost(w.forget),
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

func (w *Writer) forget(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
	for _, ps := range parts {
		w.lag.forget(ps)
	}
}

func (w *Writer) run(ctx context.Context, cl *kgo.Client) {
	for {
		recs, parts, ok := w.gather(ctx, cl)
		if !ok {
			cl.AllowRebalance()
			return
		}
		if err := w.store(ctx, recs); err != nil {
			cl.AllowRebalance()
			return // only when ctx ended: nothing of this poll is committed
		}
		for p, s := range parts {
			w.lag.stored(p, s.last.Offset, s.last.Timestamp, s.hwm)
		}
		if err := cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn("history: commit failed; events will be applied again", "err", err)
		}
		cl.AllowRebalance()
	}
}

// gathered is what a gather took of one partition: its first and last
// records, and its high watermark at the last poll that returned some.
type gathered struct {
	first, last *kgo.Record
	hwm         int64
}

// gather polls until it holds MaxPollRecords events, or Gather has passed
// since its first poll that returned any; ok is false once the client is
// closed or ctx has ended. The group cannot rebalance meanwhile
// (BlockRebalanceOnPoll): a rebalance waits for Gather and a write at most.
func (w *Writer) gather(ctx context.Context, cl *kgo.Client) (recs []*kgo.Record, parts map[int32]*gathered, ok bool) {
	parts = map[int32]*gathered{}
	var until time.Time
	for {
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if !until.IsZero() {
			left := until.Sub(w.cfg.Now())
			if left <= 0 {
				return recs, parts, true
			}
			pctx, cancel = context.WithTimeout(ctx, left)
		}
		fs := cl.PollRecords(pctx, w.cfg.MaxPollRecords-len(recs))
		cancel()
		if fs.IsClientClosed() || ctx.Err() != nil {
			return nil, nil, false
		}
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				w.log.Warn("history: fetch error", "topic", t, "partition", p, "err", err)
			}
		})
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if n := len(p.Records); n > 0 {
				g := parts[p.Partition]
				if g == nil {
					g = &gathered{first: p.Records[0]}
					parts[p.Partition] = g
					w.lag.fetched(p.Partition, g.first.Offset, g.first.Timestamp, p.HighWatermark)
				}
				g.last, g.hwm = p.Records[n-1], p.HighWatermark
				recs = append(recs, p.Records...)
			}
		})
		switch {
		case len(recs) == 0:
		case w.cfg.Gather < 0 || len(recs) >= w.cfg.MaxPollRecords:
			return recs, parts, true
		case until.IsZero():
			until = w.cfg.Now().Add(w.cfg.Gather)
		}
	}
}

// store decodes the events of one poll, coalesces them into one record per
// attempt and writes those together, retrying until ctx ends.
func (w *Writer) store(ctx context.Context, recs []*kgo.Record) error {
	c := newCoalescer()
	mapped := 0
	for _, rec := range recs {
		ev, ok, err := topics.DecodeRunEvent(rec)
		if err != nil {
			w.m.events.WithLabelValues(eventMalformed).Inc()
			w.log.Error("history: skipping an undecodable event", "partition", rec.Partition, "offset", rec.Offset, "err", err)
			continue
		}
		if !ok { // a DAG run event
			continue
		}
		w.m.events.WithLabelValues(eventDecoded).Inc()
		for _, r := range Records(ev) {
			if err := r.Validate(); err != nil {
				w.m.records.WithLabelValues(resultInvalid).Inc()
				w.log.Error("history: skipping an invalid event", "job_id", ev.GetJobId(), "run_id", ev.GetRunId(), "err", err)
				continue
			}
			mapped++
			c.add(r)
		}
	}
	w.m.coalesced.Add(float64(mapped - c.len()))
	if c.len() == 0 {
		return nil
	}
	return w.write(ctx, c.records())
}

// write stores recs in one RecordRuns call, tried again after a failure
// until ctx ends. A batch the store refuses as invalid (which validation
// before it should prevent) is written record by record, so that only the
// bad record is dropped.
func (w *Writer) write(ctx context.Context, recs []store.RunRecord) error {
	b := backoff.New(50*time.Millisecond, 5*time.Second)
	for {
		err := w.cfg.History.RecordRuns(ctx, recs)
		switch {
		case err == nil:
			w.m.batches.Inc()
			w.m.records.WithLabelValues(resultStored).Add(float64(len(recs)))
			now := w.cfg.Now()
			for _, r := range recs {
				w.m.latency.Observe(max(now.Sub(r.UpdatedAt).Seconds(), 0))
			}
			return nil
		case errors.Is(err, store.ErrInvalid):
			for _, r := range recs {
				if err := w.record(ctx, r); err != nil {
					return err
				}
			}
			return nil
		}
		w.m.retries.Inc()
		w.log.Warn("history: write failed; retrying", "records", len(recs), "err", err)
		if !b.Wait(ctx) {
			return ctx.Err()
		}
	}
}

// record writes one record, tried again after a failure until ctx ends.
func (w *Writer) record(ctx context.Context, r store.RunRecord) error {
	b := backoff.New(50*time.Millisecond, 5*time.Second)
	for {
		err := w.cfg.History.RecordRun(ctx, r)
		if err == nil {
			w.m.records.WithLabelValues(resultStored).Inc()
			w.m.latency.Observe(max(w.cfg.Now().Sub(r.UpdatedAt).Seconds(), 0))
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
