package enqueue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/internal/deps"
	"github.com/sundialhq/sundial/internal/deps/metricdeps"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/store"
)

// DefaultWakeHorizon is how far ahead of now an entry still gets a wake-up
// unless configured. It must exceed what any dispatcher loads ahead (its
// look-ahead plus one bucket, a minute) plus the clock skew between hosts.
const DefaultWakeHorizon = 5 * time.Minute

// Config configures an Enqueuer.
type Config struct {
	// Store receives the entries. Required.
	Store store.Schedule
	// Client produces the wake-ups. Required; it must have been created
	// with kgo.RecordPartitioner(Partitioner(...)) so that a wake-up lands on
	// the partition of its shard. Its acks setting should be the default
	// (all), so an acknowledged wake-up survives a broker failure.
	Client *kgo.Client
	// Topics names sundial.shards.
	Topics topics.Names
	// Shards is S, the cluster's shard count (store.GetClusterConfig).
	// Required; it must equal the partition count of sundial.shards.
	Shards int
	// WakeHorizon: entries due more than this after now get no wake-up
	// (their bucket has not been loaded by anyone yet). Default
	// DefaultWakeHorizon; must be at least two minutes.
	WakeHorizon time.Duration
	// Registerer receives the Enqueuer's metrics (see metrics.go). Nil:
	// none kept. One Enqueuer per registry: a second one's metrics collide
	// and New fails.
	Registerer prometheus.Registerer
	// Logger; nil discards.
	Logger *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	c.WakeHorizon = cmp.Or(c.WakeHorizon, DefaultWakeHorizon)
	c.Logger = deps.Logger(c.Logger)
	c.Now = deps.Clock(c.Now)
	return c
}

// Validate reports every bad field, after defaults are applied.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Store == nil {
		errs = append(errs, errors.New("enqueue config: store: required"))
	}
	if c.Client == nil {
		errs = append(errs, errors.New("enqueue config: client: required"))
	} else if _, ok := c.Client.OptValue(kgo.RecordPartitioner).(*partitioner); !ok {
		errs = append(errs, errors.New("enqueue config: client: must be created with kgo.RecordPartitioner(enqueue.Partitioner(...))"))
	}
	if c.Shards <= 0 {
		errs = append(errs, fmt.Errorf("enqueue config: shards %d: must be positive", c.Shards))
	}
	if c.WakeHorizon < 2*time.Minute {
		errs = append(errs, fmt.Errorf("enqueue config: wake horizon %s: must be at least 2m (look-ahead plus one bucket)", c.WakeHorizon))
	}
	return errors.Join(errs...)
}

// Enqueuer writes due entries and wakes their shard owners. It is safe for
// concurrent use and has no goroutines of its own.
type Enqueuer struct {
	cfg Config
	m   *metrics
}

// New returns an Enqueuer, or the configuration's errors.
func New(cfg Config) (*Enqueuer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	reg := cfg.Registerer
	reg = metricdeps.Registerer(reg)
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &Enqueuer{cfg: cfg, m: m}, nil
}

// Enqueue stores the entries (store.PutDue), then produces a wake-up for each
// entry due within the wake horizon and waits for the acknowledgements. On
// error the caller retries the whole call; see the package doc.
func (q *Enqueuer) Enqueue(ctx context.Context, entries ...store.DueEntry) error {
	if len(entries) == 0 {
		return nil
	}
	start := time.Now()
	outcome, err := q.enqueue(ctx, entries)
	q.m.duration.WithLabelValues(opEnqueue, outcome).Observe(time.Since(start).Seconds())
	return err
}

func (q *Enqueuer) enqueue(ctx context.Context, entries []store.DueEntry) (outcome string, _ error) {
	if err := validate(entries); err != nil {
		return outcomeInvalid, fmt.Errorf("enqueue: %w", err)
	}
	if err := q.cfg.Store.PutDue(ctx, entries...); err != nil {
		return outcomeStoreError, fmt.Errorf("enqueue: store %d entries: %w", len(entries), err)
	}
	for _, e := range entries {
		q.m.entries.WithLabelValues(string(e.Kind)).Inc()
	}
	return q.wake(ctx, entries)
}

// Wake produces the wake-ups of entries the caller has already stored (the
// registry stores its first occurrence with the job row, store.UpsertJob).
// Entries due beyond the wake horizon are skipped.
func (q *Enqueuer) Wake(ctx context.Context, entries ...store.DueEntry) error {
	start := time.Now()
	outcome, err := q.wake(ctx, entries)
	q.m.duration.WithLabelValues(opWake, outcome).Observe(time.Since(start).Seconds())
	return err
}

func (q *Enqueuer) wake(ctx context.Context, entries []store.DueEntry) (outcome string, _ error) {
	if err := validate(entries); err != nil {
		return outcomeInvalid, fmt.Errorf("wake: %w", err)
	}
	horizon := q.cfg.Now().Add(q.cfg.WakeHorizon)
	recs := make([]*kgo.Record, 0, len(entries))
	for _, e := range entries {
		if e.Due.After(horizon) {
			continue
		}
		rec, err := q.record(e)
		if err != nil {
			return outcomeInvalid, fmt.Errorf("wake: %w", err)
		}
		recs = append(recs, rec)
	}
	q.m.wakeups.WithLabelValues(wakeSkipped).Add(float64(len(entries) - len(recs)))
	if len(recs) == 0 {
		return outcomeOK, nil
	}
	if err := q.cfg.Client.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		q.m.wakeups.WithLabelValues(wakeFailed).Add(float64(len(recs)))
		return outcomeWakeError, fmt.Errorf("wake: produce %d wake-ups to %s: %w", len(recs), q.cfg.Topics.Shards(), err)
	}
	q.m.wakeups.WithLabelValues(wakeProduced).Add(float64(len(recs)))
	q.cfg.Logger.Debug("woke shard owners", "entries", len(recs))
	return outcomeOK, nil
}

// WakeRecords returns the wake-ups of entries the caller has already
// stored, for the caller to produce with its own client and acknowledge
// before it commits (the registry produces them with its answers, so no
// record waits on a produce of its own). That client must use Partitioner.
// Entries due beyond the wake horizon get none. The wake-ups returned count
// as produced: the caller produces them until Kafka takes them.
func (q *Enqueuer) WakeRecords(entries ...store.DueEntry) ([]*kgo.Record, error) {
	if err := validate(entries); err != nil {
		return nil, fmt.Errorf("wake: %w", err)
	}
	horizon := q.cfg.Now().Add(q.cfg.WakeHorizon)
	var recs []*kgo.Record
	for _, e := range entries {
		if e.Due.After(horizon) {
			continue
		}
		rec, err := q.record(e)
		if err != nil {
			return nil, fmt.Errorf("wake: %w", err)
		}
		recs = append(recs, rec)
	}
	q.m.wakeups.WithLabelValues(wakeSkipped).Add(float64(len(entries) - len(recs)))
	q.m.wakeups.WithLabelValues(wakeProduced).Add(float64(len(recs)))
	return recs, nil
}

// record builds the wake-up of one entry.
func (q *Enqueuer) record(e store.DueEntry) (*kgo.Record, error) {
	value, err := Encode(e)
	if err != nil {
		return nil, err
	}
	return &kgo.Record{
		Topic:     q.cfg.Topics.Shards(),
		Partition: int32(store.ShardOf(e.JobID, q.cfg.Shards)),
		Key:       []byte(e.JobID),
		Value:     value,
	}, nil
}

func validate(entries []store.DueEntry) error {
	var errs []error
	for i, e := range entries {
		if err := e.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("entry %d (job %q): %w", i, e.JobID, err))
		}
	}
	return errors.Join(errs...)
}
