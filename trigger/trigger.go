package trigger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/dagengine"
	"github.com/sundialhq/sundial/internal/backoff"
	"github.com/sundialhq/sundial/internal/consume"
	"github.com/sundialhq/sundial/internal/deps"
	"github.com/sundialhq/sundial/internal/deps/metricdeps"
	"github.com/sundialhq/sundial/internal/lifecycle"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/internal/tracing"
	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// DefaultGroup is the consumer group on sundial.triggers.
const DefaultGroup = "sundial-triggers"

// Reasons of SKIPPED events for refused triggers.
const (
	ReasonJobDeleted = "job_deleted"
	ReasonPaused     = "paused"
	ReasonInvalid    = "invalid_trigger"
	ReasonExpired    = "expired"
)

// Store is what triggers need from the store.
type Store interface {
	GetJob(ctx context.Context, id string) (store.Job, error)
	// GetDag is read only with Config.Dags set.
	GetDag(ctx context.Context, id string) (store.Dag, error)
	store.Triggers
}

// DagStarter starts the run of a DAG due at a time, once however often it
// is asked (*dagengine.Runs).
type DagStarter interface {
	StartRun(ctx context.Context, dagID string, due time.Time, origin string) (id string, created bool, err error)
}

// Enqueuer stores due entries and wakes their dispatchers
// (*enqueue.Enqueuer).
type Enqueuer interface {
	Enqueue(ctx context.Context, entries ...store.DueEntry) error
}

// Config configures a Consumer.
type Config struct {
	// Kafka are the options of every Kafka client of the consumer: the seed brokers
	// (kgo.SeedBrokers) and the connection's TLS and SASL, as
	// connect.Kafka.Options builds them from the command's flags. Required.
	Kafka []kgo.Opt
	// Topics names sundial.triggers and sundial.events.
	Topics topics.Names
	// Group is the consumer group. Default DefaultGroup.
	Group string
	// Store holds jobs and idempotency keys. Required.
	Store Store
	// Enqueuer schedules the runs. Required.
	Enqueuer Enqueuer
	// Dags, if set, starts DAG runs: a trigger whose key names no job but
	// a DAG starts that DAG's run due at the trigger's due time. Nil: such
	// a trigger is refused as job_deleted.
	Dags DagStarter
	// Retention is how long idempotency keys are remembered, and the age
	// beyond which a trigger is refused. Default topics.TriggersRetention.
	Retention time.Duration
	// MaxPayloadBytes bounds a trigger's payload override. Default
	// jobspec.DefaultMaxPayloadBytes.
	MaxPayloadBytes int
	// ID names this process in the events it publishes (RunEvent.runner_id).
	// Default "trigger".
	ID string
	// Concurrency is how many jobs' triggers are processed at once.
	// Default 32.
	Concurrency int
	// MaxPoll bounds the records taken from Kafka at once. Default 1000.
	MaxPoll int
	// RetryMin and RetryMax bound the backoff of transient errors.
	// Defaults 50ms and 10s.
	RetryMin, RetryMax time.Duration
	// Registerer receives the metrics. Default: none kept.
	Registerer prometheus.Registerer
	// Logger; nil discards.
	Logger *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
	// TracerProvider receives a span per trigger handled, continuing the
	// record's traceparent header, or the trigger's traceparent field when
	// the record has none (package tracing). The run the trigger starts
	// continues that span. Nil: tracing off.
	TracerProvider trace.TracerProvider
	// EventEncoding is how the events it writes to sundial.events are
	// encoded: binary protobuf (the zero value) or, for people and tools
	// reading the topic, JSON (the content-type header says which; every
	// reader takes both).
	EventEncoding sundialv1.Encoding
}

func (c Config) withDefaults() Config {
	c.Group = cmp.Or(c.Group, c.Topics.Group(DefaultGroup))
	c.Retention = cmp.Or(c.Retention, topics.TriggersRetention)
	c.MaxPayloadBytes = cmp.Or(c.MaxPayloadBytes, jobspec.DefaultMaxPayloadBytes)
	c.ID = cmp.Or(c.ID, "trigger")
	c.Concurrency = cmp.Or(c.Concurrency, 32)
	c.MaxPoll = cmp.Or(c.MaxPoll, 1000)
	c.RetryMin = cmp.Or(c.RetryMin, 50*time.Millisecond)
	c.RetryMax = cmp.Or(c.RetryMax, 10*time.Second)
	c.Registerer = metricdeps.Registerer(c.Registerer)
	c.Logger = deps.Logger(c.Logger)
	c.Now = deps.Clock(c.Now)
	return c
}

// Validate reports every bad field, after defaults are applied.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if len(c.Kafka) == 0 {
		errs = append(errs, errors.New("trigger config: kafka: required (at least kgo.SeedBrokers)"))
	}
	if c.Store == nil {
		errs = append(errs, errors.New("trigger config: store: required"))
	}
	if c.Enqueuer == nil {
		errs = append(errs, errors.New("trigger config: enqueuer: required"))
	}
	if c.Retention < time.Minute {
		errs = append(errs, fmt.Errorf("trigger config: retention %s: must be at least 1m", c.Retention))
	}
	if c.MaxPayloadBytes < 0 {
		errs = append(errs, fmt.Errorf("trigger config: max payload bytes %d: must not be negative", c.MaxPayloadBytes))
	}
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("trigger config: concurrency %d: must be positive", c.Concurrency))
	}
	if c.MaxPoll < 1 {
		errs = append(errs, fmt.Errorf("trigger config: max poll %d: must be positive", c.MaxPoll))
	}
	if c.RetryMin <= 0 || c.RetryMax < c.RetryMin {
		errs = append(errs, fmt.Errorf("trigger config: retry backoff %s..%s: want 0 < min <= max", c.RetryMin, c.RetryMax))
	}
	return errors.Join(errs...)
}

// Consumer consumes sundial.triggers.
type Consumer struct {
	cfg     Config
	metrics *metrics
	tracer  trace.Tracer

	life lifecycle.Lifecycle
}

// New returns a Consumer, or every configuration error.
func New(cfg Config) (*Consumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Consumer{cfg: cfg, metrics: m, tracer: tracing.Tracer(cfg.TracerProvider)}, nil
}

// Start joins the consumer group and starts processing. ctx bounds the
// start only. A stopped Consumer may be started again.
func (c *Consumer) Start(ctx context.Context) error {
	if err := c.life.Start(ctx, c.start); err != nil {
		return fmt.Errorf("trigger: %w", err)
	}
	return nil
}

func (c *Consumer) start(_ context.Context, run *lifecycle.Run) error {
	opts := append(slices.Clone(c.cfg.Kafka),
		consume.GroupOptions(c.cfg.Group, c.cfg.Topics.Triggers())...)
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	run.OnStop(client.Close)
	loop := &consume.Loop{
		Client:      client,
		Handle:      c.handle,
		Concurrency: c.cfg.Concurrency,
		MaxPoll:     c.cfg.MaxPoll,
		Backoff:     c.backoff("commit"),
		Logger:      c.cfg.Logger,
	}
	run.Go(loop.Run)
	c.cfg.Logger.Info("trigger consumer started", "topic", c.cfg.Topics.Triggers(), "group", c.cfg.Group)
	return nil
}

// Stop ends processing and leaves the group. It is idempotent, safe before
// Start, and returns once processing has ended.
func (c *Consumer) Stop() { c.life.Stop() }

func (c *Consumer) backoff(op string) backoff.Config {
	return backoff.Config{
		Min: c.cfg.RetryMin,
		Max: c.cfg.RetryMax,
		OnRetry: func(err error) {
			c.metrics.retries.WithLabelValues(op).Inc()
			c.cfg.Logger.Warn("retrying after a transient error", "op", op, "err", err)
		},
		Permanent: func(err error) bool { return errors.Is(err, store.ErrInvalid) },
	}
}

// handle processes one trigger record and returns the event that refuses
// it, if it is refused.
func (c *Consumer) handle(ctx context.Context, rec *kgo.Record) []*kgo.Record {
	start := c.cfg.Now()
	if rec.Value == nil {
		c.metrics.records.WithLabelValues("ignored").Inc() // a tombstone means nothing here
		return nil
	}
	d, errs := jobspec.DecodeTrigger(rec, c.cfg.MaxPayloadBytes)
	parent := tracing.FromRecord(ctx, rec)
	if parent == ctx && d.Trigger != nil {
		parent = tracing.WithTraceparent(ctx, d.Trigger.GetTraceparent())
	}
	ctx, span := c.tracer.Start(parent, "registry.trigger", trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("sundial.job_id", d.JobID)))
	defer span.End()
	out, outcome, err := c.decide(ctx, rec, d, errs)
	span.SetAttributes(attribute.String("sundial.outcome", outcome))
	if errors.Is(err, backoff.ErrPermanent) {
		c.cfg.Logger.Error("the store refused a trigger", "partition", rec.Partition, "offset", rec.Offset, "err", err)
		out, outcome, err = c.refuse(d, ReasonInvalid, nil, err.Error()), "invalid", nil
	}
	if err != nil {
		c.cfg.Logger.Debug("trigger left for redelivery", "partition", rec.Partition, "offset", rec.Offset, "err", err)
		return nil
	}
	c.metrics.records.WithLabelValues(outcome).Inc()
	c.metrics.latency.Observe(c.cfg.Now().Sub(start).Seconds())
	return out
}

func (c *Consumer) decide(ctx context.Context, rec *kgo.Record, d jobspec.TriggerRecord, errs []jobspec.FieldError) ([]*kgo.Record, string, error) {
	if len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.Error()
		}
		return c.refuse(d, ReasonInvalid, nil, strings.Join(msgs, "; ")), "invalid", nil
	}
	if age := c.cfg.Now().Sub(d.Due); age > c.cfg.Retention {
		return c.refuse(d, ReasonExpired, nil, fmt.Sprintf("requested %s ago, longer than the %s idempotency keys are kept", age.Round(time.Second), c.cfg.Retention)), "expired", nil
	}

	var (
		job   store.Job
		found bool
	)
	err := backoff.Retry(ctx, c.backoff("get_job"), func() error {
		j, err := c.cfg.Store.GetJob(ctx, d.JobID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		job, found = j, err == nil
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	if !found || job.Deleted {
		if c.cfg.Dags != nil {
			if out, outcome, ok, err := c.decideDag(ctx, d); ok || err != nil {
				return out, outcome, err
			}
		}
		return c.refuse(d, ReasonJobDeleted, nil, fmt.Sprintf("job_id %q: no such job", d.JobID)), "job_deleted", nil
	}
	spec := &sundialv1.JobSpec{}
	if err := proto.Unmarshal(job.Spec, spec); err != nil {
		// The registry stored it, so this is a bug or corruption; refusing
		// beats retrying forever.
		c.cfg.Logger.Error("stored definition does not decode", "job", d.JobID, "err", err)
		return c.refuse(d, ReasonInvalid, nil, fmt.Sprintf("job_id %q: the stored definition does not decode", d.JobID)), "invalid", nil
	}
	if spec.GetPaused() {
		return c.refuse(d, ReasonPaused, spec, fmt.Sprintf("job_id %q is paused", d.JobID)), "paused", nil
	}

	if dup, err := c.duplicate(ctx, d); err != nil || dup {
		return nil, "duplicate", err
	}

	t := proto.Clone(d.Trigger).(*sundialv1.Trigger)
	t.RequestedAt = timestamppb.New(d.Due)
	// The dispatcher that fires the run continues this trace.
	if tp := tracing.Traceparent(ctx); tp != "" {
		t.Traceparent = tp
	}
	payload, err := proto.MarshalOptions{Deterministic: true}.Marshal(t)
	if err != nil {
		return nil, "", fmt.Errorf("encode trigger: %w", err)
	}
	entry := store.DueEntry{
		Due:      d.Due,
		JobID:    d.JobID,
		Kind:     store.KindTrigger,
		RunID:    store.RunID(d.JobID, d.Due),
		Attempt:  1,
		Revision: job.Revision,
		Payload:  payload,
	}
	if err := backoff.Retry(ctx, c.backoff("enqueue"), func() error { return c.cfg.Enqueuer.Enqueue(ctx, entry) }); err != nil {
		return nil, "", err
	}
	return nil, "enqueued", nil
}

// duplicate records the trigger's idempotency key, and reports whether an
// earlier trigger holds it (under another due time).
func (c *Consumer) duplicate(ctx context.Context, d jobspec.TriggerRecord) (bool, error) {
	key := d.Trigger.GetIdempotencyKey()
	var first time.Time
	if err := backoff.Retry(ctx, c.backoff("dedupe"), func() (err error) {
		first, err = c.cfg.Store.TriggerDedupe(ctx, d.JobID, key, d.Due, c.cfg.Retention)
		return err
	}); err != nil {
		return false, err
	}
	if !first.Equal(d.Due) {
		c.cfg.Logger.Debug("duplicate trigger", "id", d.JobID, "key", key, "first_due", first)
		return true, nil
	}
	return false, nil
}

// decideDag handles a trigger whose key names no job: if it names a DAG,
// the DAG's run due at the trigger's due time is started (ok true). Jobs
// and DAGs share one id namespace and one table of idempotency keys.
func (c *Consumer) decideDag(ctx context.Context, d jobspec.TriggerRecord) (out []*kgo.Record, outcome string, ok bool, err error) {
	var (
		dg    store.Dag
		found bool
	)
	err = backoff.Retry(ctx, c.backoff("get_dag"), func() error {
		g, err := c.cfg.Store.GetDag(ctx, d.JobID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		dg, found = g, err == nil
		return nil
	})
	switch {
	case err != nil:
		return nil, "", false, err
	case !found || dg.Deleted:
		return nil, "", false, nil
	}
	spec := &sundialv1.DagSpec{}
	if err := proto.Unmarshal(dg.Spec, spec); err != nil {
		c.cfg.Logger.Error("stored DAG definition does not decode", "dag", d.JobID, "err", err)
		return c.refuse(d, ReasonInvalid, nil, fmt.Sprintf("job_id %q: the stored DAG definition does not decode", d.JobID)), "invalid", true, nil
	}
	if spec.GetPaused() {
		return c.refuse(d, ReasonPaused, &sundialv1.JobSpec{OwnerTeam: spec.GetOwnerTeam()}, fmt.Sprintf("DAG %q is paused", d.JobID)), "paused", true, nil
	}
	if dup, err := c.duplicate(ctx, d); err != nil || dup {
		return nil, "duplicate", true, err
	}
	// A DAG deleted or paused since it was read, or a run that cannot be
	// processed, is refused rather than retried.
	b := c.backoff("start_dag_run")
	b.Permanent = func(err error) bool {
		return errors.Is(err, dagengine.ErrNotRunnable) || errors.Is(err, dagengine.ErrPermanent)
	}
	if err := backoff.Retry(ctx, b, func() error {
		_, _, err := c.cfg.Dags.StartRun(ctx, d.JobID, d.Due, dagengine.OriginTrigger)
		return err
	}); err != nil {
		return nil, "", true, err
	}
	return nil, "dag_started", true, nil
}

// refuse builds the SKIPPED event of a trigger that will not run. spec is
// the job's definition when known.
func (c *Consumer) refuse(d jobspec.TriggerRecord, reason string, spec *sundialv1.JobSpec, message string) []*kgo.Record {
	jobID := strings.ToValidUTF8(d.JobID, "\uFFFD")
	due := timestamppb.New(d.Due)
	ev := &sundialv1.RunEvent{
		RunId:          store.RunID(jobID, d.Due),
		JobId:          jobID,
		Attempt:        1,
		State:          sundialv1.RunState_RUN_STATE_SKIPPED,
		Time:           timestamppb.New(c.cfg.Now()),
		DueTime:        due,
		AttemptDueTime: due,
		RunnerId:       c.cfg.ID,
		Reason:         reason,
		Error:          &sundialv1.RunError{Code: reason, Message: strings.ToValidUTF8(message, "\uFFFD")},
		Priority:       spec.GetPriority(),
		OwnerTeam:      spec.GetOwnerTeam(),
	}
	value, headers, err := topics.EncodeEvent(c.cfg.EventEncoding, ev)
	if err != nil {
		c.cfg.Logger.Error("encode refusal", "job", jobID, "err", err)
		return nil
	}
	key := []byte(d.JobID)
	return []*kgo.Record{{
		Topic:   c.cfg.Topics.Events(),
		Key:     key,
		Value:   value,
		Headers: headers,
	}}
}

type metrics struct {
	records *prometheus.CounterVec
	retries *prometheus.CounterVec
	latency prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sundial", Subsystem: "trigger", Name: "records_total",
			Help: "Trigger records processed, by outcome (enqueued, dag_started, duplicate, job_deleted, paused, invalid, expired, ignored).",
		}, []string{"outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sundial", Subsystem: "trigger", Name: "retries_total",
			Help: "Transient store or Kafka errors retried, by operation.",
		}, []string{"op"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "sundial", Subsystem: "trigger", Name: "processing_seconds",
			Help:    "Time to check, deduplicate and enqueue one trigger.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
	}
	for _, col := range []prometheus.Collector{m.records, m.retries, m.latency} {
		if err := reg.Register(col); err != nil {
			return nil, fmt.Errorf("trigger metrics: %w", err)
		}
	}
	return m, nil
}
