package registry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/audit"
	"github.com/sundialhq/sundial/enqueue"
	"github.com/sundialhq/sundial/internal/backoff"
	"github.com/sundialhq/sundial/internal/consume"
	"github.com/sundialhq/sundial/internal/deps"
	"github.com/sundialhq/sundial/internal/deps/metricdeps"
	"github.com/sundialhq/sundial/internal/lifecycle"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/internal/tracing"
	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/quota"
	"github.com/sundialhq/sundial/schedule"
	"github.com/sundialhq/sundial/store"
)

// DefaultGroup is the consumer group of the registry on sundial.jobs.
const DefaultGroup = "sundial-registry"

// DefaultConcurrency is how many jobs one registry processes at once by
// default. Their reads of the jobs in force go to the store together
// (lookups), and so do their upserts (upserts): a call of n new
// definitions costs the Cassandra store n/32 reads, then a batch per
// partition of first occurrences, then the rows in batches of many jobs,
// three round trips in sequence. Bulk registration is bound by the node's
// CPU per definition, much of it a fixed cost per request, so many jobs
// per call share each partition's batch of first occurrences (128 shards
// and a minute bucket make 128 or 256 partitions for a bench's interval
// jobs) and the batches of rows, and enough in flight keeps the node busy
// while other calls read.
const DefaultConcurrency = 4096

// Store is what the registry needs from the store: job definitions, the
// cluster's shard count and the entries held while a job was paused.
type Store interface {
	store.Jobs
	ListHeld(ctx context.Context, jobID string) ([]store.DueEntry, error)
	DeleteHeld(ctx context.Context, keys ...store.DueKey) error
	GetClusterConfig(ctx context.Context) (store.ClusterConfig, error)
}

// Waker builds the wake-ups of entries the store already holds
// (*enqueue.Enqueuer). The registry produces them with its answers, through
// a client partitioned by enqueue.Partitioner, and commits a record only
// once both are acknowledged; so no record waits on a produce of its own.
//
// Enqueue stores entries and produces their wake-ups, returning once both
// are acknowledged; the registry uses it for the held entries of a resumed
// job, which must be scheduled again before they leave the held set
// (held.go).
type Waker interface {
	WakeRecords(entries ...store.DueEntry) ([]*kgo.Record, error)
	Enqueue(ctx context.Context, entries ...store.DueEntry) error
}

// Auditor keeps audit records (*audit.Trail). The registry produces their
// feed records on sundial.audit itself, with its answers.
type Auditor interface {
	KeepAll(ctx context.Context, recs []audit.Record) error
}

// Config configures a Registry.
type Config struct {
	// Kafka are the options of every Kafka client of the registry: the seed brokers
	// (kgo.SeedBrokers) and the connection's TLS and SASL, as
	// connect.Kafka.Options builds them from the command's flags. Required. The registry
	// sets its own group, topics and commit options after them.
	Kafka []kgo.Opt
	// Topics names sundial.jobs, the team topics sundial.jobs.<team> and
	// sundial.jobs.status.
	Topics topics.Names
	// SharedTopic makes the registry read sundial.jobs too, whose records
	// carry no identity: whoever may write it may define, change or delete
	// any team's job. Default false: only the team topics, whose writers
	// Kafka ACLs decide, are read and ownership is enforced on every
	// definition. Meant for the move of an installation's writers to their
	// team topics; the start-up log warns and
	// sundial_registry_ownership_enforced is 0 while it is set.
	SharedTopic bool
	// TopicRefresh is how often the registry looks for new team topics.
	// Default 30s.
	TopicRefresh time.Duration
	// Audit records every definition change (created, updated, deleted).
	// Default: none recorded.
	Audit Auditor
	// Group is the consumer group. Default DefaultGroup.
	Group string
	// Store holds the definitions. Required.
	Store Store
	// Waker wakes the owner of a first occurrence due soon. Required.
	Waker Waker
	// Quotas holds the team quotas and the per-team job index: the
	// registry refuses a definition that would create a job beyond its
	// team's max_jobs, and indexes every job it stores under its team.
	// Optional: nil enforces no quota and keeps no index.
	Quotas quota.Store
	// QuotaTTL is how stale the quotas the registry enforces may be.
	// Default quota.DefaultCacheTTL.
	QuotaTTL time.Duration
	// Limits bound the sizes in a definition. Default: jobspec.Limits' defaults.
	Limits jobspec.Limits
	// Concurrency is how many jobs are processed at once (records of one
	// job are always processed in order). Default DefaultConcurrency.
	Concurrency int
	// MaxPoll bounds the records taken from Kafka at once. A poll is
	// committed once all its records are answered, so it holds enough for
	// Concurrency with some to spare. Default 10000.
	MaxPoll int
	// RetryMin and RetryMax bound the backoff between retries of a
	// transient store or Kafka error. Defaults 50ms and 10s.
	RetryMin, RetryMax time.Duration
	// Registerer receives the registry's metrics. Default: none kept.
	Registerer prometheus.Registerer
	// Logger; nil discards.
	Logger *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
	// TracerProvider receives a span per definition handled, continuing
	// the record's traceparent header (package tracing). Nil: tracing off.
	TracerProvider trace.TracerProvider
	// StatusEncoding: definitions are answered on sundial.jobs.status in
	// JSON when it is EncodingJSON (for people and tools reading the
	// topic), else in the encoding each arrived in. The content-type header
	// says which; every reader takes both.
	StatusEncoding sundialv1.Encoding
}

func (c Config) withDefaults() Config {
	c.Group = cmp.Or(c.Group, c.Topics.Group(DefaultGroup))
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	c.MaxPoll = cmp.Or(c.MaxPoll, 10000)
	c.RetryMin = cmp.Or(c.RetryMin, 50*time.Millisecond)
	c.RetryMax = cmp.Or(c.RetryMax, 10*time.Second)
	c.TopicRefresh = cmp.Or(c.TopicRefresh, 30*time.Second)
	c.QuotaTTL = cmp.Or(c.QuotaTTL, quota.DefaultCacheTTL)
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
		errs = append(errs, errors.New("registry config: kafka: required (at least kgo.SeedBrokers)"))
	}
	if c.Store == nil {
		errs = append(errs, errors.New("registry config: store: required"))
	}
	if c.Waker == nil {
		errs = append(errs, errors.New("registry config: waker: required"))
	}
	if err := c.Limits.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("registry config: %w", err))
	}
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("registry config: concurrency %d: must be positive", c.Concurrency))
	}
	if c.MaxPoll < 1 {
		errs = append(errs, fmt.Errorf("registry config: max poll %d: must be positive", c.MaxPoll))
	}
	if c.QuotaTTL < 0 {
		errs = append(errs, fmt.Errorf("registry config: quota ttl %s: must be positive", c.QuotaTTL))
	}
	if c.RetryMin <= 0 || c.RetryMax < c.RetryMin {
		errs = append(errs, fmt.Errorf("registry config: retry backoff %s..%s: want 0 < min <= max", c.RetryMin, c.RetryMax))
	}
	if c.TopicRefresh < time.Second {
		errs = append(errs, fmt.Errorf("registry config: topic refresh %s: must be at least 1s", c.TopicRefresh))
	}
	return errors.Join(errs...)
}

// Registry consumes sundial.jobs and applies each definition to the store.
type Registry struct {
	cfg     Config
	metrics *metrics

	life    lifecycle.Lifecycle
	upserts *upserts
	lookups *lookups
	quotas  *quotas // nil without Config.Quotas
	audits  *audits // nil without Config.Audit
	// shards is set by Start, before any record is handled.
	shards int
	tracer trace.Tracer
}

// upsertCalls bounds the store.UpsertJobs calls in flight, and upsertJobs
// the definitions one carries: with Concurrency handlers queuing, calls
// carry up to Concurrency/upsertCalls definitions. Few large calls make
// few mutations per definition (first occurrences share their partition's
// batch) and few commit-log syncs per definition; a call of 1024 is still a
// fraction of a second's registrations, and it is what one slow call holds
// back.
const (
	upsertCalls = 4
	upsertJobs  = 1024
)

// New returns a Registry, or every configuration error. It registers the
// metrics.
func New(cfg Config) (*Registry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	r := &Registry{cfg: cfg, metrics: m, tracer: tracing.Tracer(cfg.TracerProvider),
		upserts: newUpserts(cfg.Store, upsertCalls, upsertJobs),
		lookups: newLookups(cfg.Store, upsertCalls, upsertJobs)}
	if cfg.Audit != nil {
		r.audits = newAudits(cfg.Audit, upsertCalls, upsertJobs)
	}
	if cfg.Quotas != nil {
		r.quotas = newQuotas(cfg.Quotas, quota.NewCache(cfg.Quotas, cfg.QuotaTTL, cfg.Now))
	}
	return r, nil
}

// Start reads the shard count from the store, joins the consumer group and
// starts processing. It returns once processing has started; Stop ends it.
// ctx bounds the start only. A stopped Registry may be started again.
func (r *Registry) Start(ctx context.Context) error {
	if err := r.life.Start(ctx, r.start); err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	return nil
}

func (r *Registry) start(ctx context.Context, run *lifecycle.Run) error {
	cc, err := r.cfg.Store.GetClusterConfig(ctx)
	if err != nil {
		return fmt.Errorf("read the shard count: %w", err)
	}
	patterns, exclude := r.cfg.Topics.JobsTopicPatterns(r.cfg.SharedTopic)
	opts := append(slices.Clone(r.cfg.Kafka),
		consume.RegexGroupOptions(r.cfg.Group, r.cfg.TopicRefresh, patterns, exclude)...)
	// Wake-ups go to the partition of their shard; answers by key.
	opts = append(opts, kgo.RecordPartitioner(enqueue.Partitioner(r.cfg.Topics, nil)))
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	run.OnStop(client.Close)
	r.shards = cc.Shards
	loop := &consume.Loop{
		Client:      client,
		Handle:      r.handle,
		Concurrency: r.cfg.Concurrency,
		MaxPoll:     r.cfg.MaxPoll,
		Backoff:     r.backoff("commit"),
		Logger:      r.cfg.Logger,
	}
	run.Go(loop.Run)
	r.metrics.ownershipEnforced.Set(map[bool]float64{false: 1, true: 0}[r.cfg.SharedTopic])
	r.cfg.Logger.Info("registry started", "topics", patterns, "shared_topic", r.cfg.SharedTopic,
		"ownership_enforced", !r.cfg.SharedTopic, "group", r.cfg.Group, "shards", cc.Shards)
	if r.cfg.SharedTopic {
		r.cfg.Logger.Warn("ownership is not enforced: whoever may write the shared topic may define, change or delete any team's job",
			"shared_topic", r.cfg.Topics.Jobs())
	}
	return nil
}

// Stop ends processing and leaves the group. What was processed but not
// committed is processed again by the next member, which is harmless. Stop
// is idempotent, safe before Start, and returns once processing has ended.
func (r *Registry) Stop() { r.life.Stop() }

func (r *Registry) backoff(op string) backoff.Config {
	return backoff.Config{
		Min: r.cfg.RetryMin,
		Max: r.cfg.RetryMax,
		OnRetry: func(err error) {
			r.metrics.retries.WithLabelValues(op).Inc()
			r.cfg.Logger.Warn("retrying after a transient error", "op", op, "err", err)
		},
		// The store refusing its arguments is a bug or a record it cannot
		// hold; retrying it would stop the partition for good.
		Permanent: func(err error) bool { return errors.Is(err, store.ErrInvalid) },
	}
}

// retry runs fn until it succeeds or ctx ends.
func (r *Registry) retry(ctx context.Context, op string, fn func() error) error {
	return backoff.Retry(ctx, r.backoff(op), fn)
}

// handle processes one record of sundial.jobs and returns its status record.
// It returns nothing for a record of another component (a DAG definition),
// or when ctx ends (the record is then redelivered).
func (r *Registry) handle(ctx context.Context, rec *kgo.Record) []*kgo.Record {
	start := r.cfg.Now()
	ctx, span := r.tracer.Start(tracing.FromRecord(ctx, rec), "registry.apply", trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("sundial.job_id", string(rec.Key)), attribute.String("messaging.destination.name", rec.Topic)))
	defer span.End()
	def, errs := jobspec.DecodeDefinition(rec.Key, rec.Value, rec.Headers, r.cfg.Limits)
	if def.Kind == sundialv1.KindDag && len(errs) == 0 {
		r.metrics.records.WithLabelValues("dag_skipped").Inc()
		return nil
	}
	st := &sundialv1.JobStatus{
		Subject: &sundialv1.JobStatus_JobId{JobId: jobspec.ValidUTF8(def.Key)},
		Source:  jobspec.StatusSource(rec),
		Shard:   uint32(store.ShardOf(def.Key, r.shards)),
		// Only without the shared topic does every definition come through
		// a topic whose writers the broker's ACLs decide.
		OwnershipEnforced: !r.cfg.SharedTopic,
	}
	if def.Spec != nil && def.Spec.Revision != nil {
		st.Revision = proto.Uint64(def.Spec.GetRevision())
	}

	// What the store holds for the job, read once for every rule that
	// needs it: ownership, the audit trail, and for a definition its
	// revision, its quota and whether it resumes a paused job. The read
	// joins those of the other records in flight (lookups).
	var (
		prior  stored
		before *store.Job // the job in force: prior, unless deleted
	)
	team, teamTopic := r.cfg.Topics.TeamOf(rec.Topic)
	// A definition whose only problems are the id namespace rule may be a
	// legacy job's update: it is kept when the store holds the job under
	// that id for the same owner (jobspec.LegacyAllowed).
	legacy := len(errs) > 0 && def.Spec != nil &&
		len(jobspec.LegacyAllowed(errs, def.Spec, def.Spec.GetOwnerTeam(), true)) == 0
	if (len(errs) == 0 || legacy) && (!def.Tombstone || teamTopic || r.cfg.Audit != nil) {
		var err error
		if prior, err = r.lookup(ctx, def.Key); err != nil { // ctx ended: the record is redelivered later
			return nil
		}
		if prior.found && !prior.job.Deleted {
			before = &prior.job
		}
	}
	if legacy {
		var owner string
		if before != nil {
			owner = r.decodeStored(*before).GetOwnerTeam()
		}
		errs = jobspec.LegacyAllowed(errs, def.Spec, owner, before != nil)
	}
	if len(errs) == 0 && teamTopic {
		errs = r.checkOwner(rec.Topic, team, def, before)
	}

	var (
		err error
		v   verdict
	)
	switch {
	case len(errs) > 0:
		v = rejected(errs...)
	case def.Tombstone:
		v, err = r.delete(ctx, rec)
	default:
		v, err = r.apply(ctx, rec, def.Spec, prior)
	}
	switch {
	case errors.Is(err, backoff.ErrPermanent):
		r.cfg.Logger.Error("the store refused a record", "topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "err", err)
		v = rejected(jobspec.FieldError{Field: "record", Reason: fmt.Sprintf("the store refused the definition: %v", err)})
	case err != nil: // ctx ended: the record is redelivered later
		r.cfg.Logger.Debug("record left for redelivery", "topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "err", err)
		return nil
	}
	r.answer(st, v)
	wake := v.wake

	var trail []*kgo.Record
	if r.cfg.Audit != nil {
		if trail, err = r.audit(ctx, rec, def, before, st); err != nil {
			return nil // ctx ended: the record is redelivered later
		}
	}

	now := r.cfg.Now()
	st.ProcessedAt = timestamppb.New(now)
	r.metrics.records.WithLabelValues(outcomeLabel(st.GetOutcome())).Inc()
	span.SetAttributes(attribute.String("sundial.outcome", outcomeLabel(st.GetOutcome())))
	r.metrics.latency.Observe(now.Sub(start).Seconds())
	r.metrics.lag.Observe(max(0, now.Sub(rec.Timestamp).Seconds()))
	return append(append(r.wakeRecords(wake), trail...), r.statusRecord(rec, def.Encoding, st))
}

// audit keeps the audit record of an accepted change (not of an unchanged
// definition, nor of deleting a job that did not exist) and returns its feed
// record for sundial.audit. It fails only when ctx ends.
func (r *Registry) audit(ctx context.Context, rec *kgo.Record, def jobspec.Definition, before *store.Job, st *sundialv1.JobStatus) ([]*kgo.Record, error) {
	var action string
	switch st.GetOutcome() {
	case sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED:
		action = audit.ActionJobCreated
	case sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UPDATED:
		action = audit.ActionJobUpdated
	case sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_DELETED:
		if before == nil {
			return nil, nil
		}
		action = audit.ActionJobDeleted
	default:
		return nil, nil
	}
	a := audit.Record{
		// Zero-padded, so that the ids of one job's records sort as its
		// offsets do: they break ties between records of one millisecond.
		ID:            fmt.Sprintf("kafka:%s/%d/%020d", rec.Topic, rec.Partition, rec.Offset),
		At:            rec.Timestamp,
		Actor:         "kafka:" + rec.Topic,
		Action:        action,
		Subject:       def.Key,
		RevisionAfter: r.revision(rec),
	}
	var old *sundialv1.JobSpec
	if before != nil {
		a.RevisionBefore = before.Revision
		old = r.decodeStored(*before)
	}
	if def.Spec == nil { // a delete: the definition after is none
		a.Changes = audit.Diff(old, nil)
	} else {
		a.Changes = audit.Diff(old, def.Spec)
	}
	a.Team = cmp.Or(def.Spec.GetOwnerTeam(), old.GetOwnerTeam())
	bo := r.backoff("audit")
	bo.Permanent = func(err error) bool { return errors.Is(err, audit.ErrInvalid) || errors.Is(err, store.ErrInvalid) }
	// Validated alone first: the records kept together fail together.
	err := a.Validate()
	if err == nil {
		err = backoff.Retry(ctx, bo, func() error { _, err := r.audits.do(ctx, a); return err })
	} else {
		err = fmt.Errorf("%w: %w", backoff.ErrPermanent, err)
	}
	switch {
	case errors.Is(err, backoff.ErrPermanent): // a bug: answer the record all the same
		r.cfg.Logger.Error("audit record refused", "id", a.ID, "err", err)
		return nil, nil
	case err != nil:
		return nil, err
	}
	kr, err := audit.KafkaRecord(r.cfg.Topics.Audit(), a)
	if err != nil { // a Record always encodes; the store has it regardless
		r.cfg.Logger.Error("audit record not published", "id", a.ID, "err", err)
		return nil, nil
	}
	return []*kgo.Record{kr}, nil
}

// checkOwner applies the ownership rules to a record of team's topic: its
// definition must name team as owner_team, and the job in force (before)
// must be team's. The answer never names the team that owns a job.
func (r *Registry) checkOwner(topic, team string, def jobspec.Definition, before *store.Job) []jobspec.FieldError {
	if !def.Tombstone && def.Spec.GetOwnerTeam() != team {
		return []jobspec.FieldError{{Field: "owner_team", Reason: fmt.Sprintf(
			"%q is not the team of topic %s, %q: a team's topic carries only that team's jobs", def.Spec.GetOwnerTeam(), topic, team)}}
	}
	if before == nil {
		return nil
	}
	if old := r.decodeStored(*before); old != nil && old.GetOwnerTeam() != team {
		return []jobspec.FieldError{{Field: "owner_team", Reason: fmt.Sprintf(
			"job %s belongs to another team: a team may change or delete only its own jobs", def.Key)}}
	}
	return nil
}

// wakeRecords returns the wake-ups of the entries the record stored, to be
// produced before its answer. Entries that cannot be encoded get none: the
// entry is stored and the wake-up is only a hint, so it waits for its bucket
// read.
func (r *Registry) wakeRecords(entries []store.DueEntry) []*kgo.Record {
	if len(entries) == 0 {
		return nil
	}
	recs, err := r.cfg.Waker.WakeRecords(entries...)
	if err != nil {
		r.cfg.Logger.Error("wake-up refused; the entry waits for its bucket read", "job", entries[0].JobID, "err", err)
		return nil
	}
	return recs
}

func (r *Registry) reject(st *sundialv1.JobStatus, errs []jobspec.FieldError) {
	jobspec.Reject(st, errs)
	seen := map[string]bool{}
	for _, e := range errs {
		if f := metricField(e.Field); !seen[f] {
			seen[f] = true
			r.metrics.rejections.WithLabelValues(f).Inc()
		}
	}
}

func (r *Registry) delete(ctx context.Context, rec *kgo.Record) (verdict, error) {
	var outcome store.Outcome
	err := r.retry(ctx, "delete_job", func() (err error) {
		outcome, err = r.cfg.Store.DeleteJob(ctx, string(rec.Key), r.revision(rec), rec.Timestamp)
		return err
	})
	if err != nil {
		return verdict{}, err
	}
	if outcome == store.OutcomeStale {
		return verdict{outcome: sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_STALE}, nil
	}
	// What a paused job held dies with it.
	if err := r.dropHeld(ctx, string(rec.Key)); err != nil {
		return verdict{}, err
	}
	if err := r.untrackJob(ctx, string(rec.Key), r.revision(rec)); err != nil {
		return verdict{}, err
	}
	// Deleting an unknown or already deleted id is DELETED too: deletes are
	// idempotent.
	return verdict{outcome: sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_DELETED}, nil
}

// apply stores a definition and returns what became of it, with the
// entries whose owners must be woken. prior is what the store held for the
// job before it.
func (r *Registry) apply(ctx context.Context, rec *kgo.Record, spec *sundialv1.JobSpec, prior stored) (verdict, error) {
	now := r.cfg.Now()
	job, resumed, errs := r.prepare(rec, spec, prior, now)
	if len(errs) > 0 {
		return rejected(errs...), nil
	}
	fe, over, unlock, err := r.checkMaxJobs(ctx, spec, prior.found && !prior.job.Deleted)
	if err != nil {
		return verdict{}, err
	}
	// A create of a limited team holds its team's create lock until the
	// job is indexed (checkMaxJobs).
	defer unlock()
	if over {
		return rejected(fe), nil
	}

	var outcome store.Outcome
	if err := r.retry(ctx, "upsert_job", func() (err error) {
		outcome, err = upsert(ctx, r.upserts, job)
		return err
	}); err != nil {
		return verdict{}, err
	}
	if outcome != store.OutcomeStale {
		if err := r.trackJob(ctx, spec, job.Revision); err != nil {
			return verdict{}, err
		}
	}
	unlock()

	switch outcome {
	case store.OutcomeCreated, store.OutcomeUpdated:
		v := verdict{outcome: sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED}
		if outcome == store.OutcomeUpdated {
			v.outcome = sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UPDATED
		}
		if resumed {
			if err := r.release(ctx, job.ID); err != nil {
				return verdict{}, err
			}
		}
		if !job.NextDue.IsZero() {
			v.next = store.Truncate(job.NextDue)
			v.wake = []store.DueEntry{job.ScheduledEntry()}
		}
		return v, nil
	case store.OutcomeUnchanged:
		return r.unchanged(ctx, spec, job, now)
	}
	return verdict{outcome: sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_STALE}, nil
}

// prepare turns a definition into the job row to store, and says whether
// it resumes a paused job; or returns why it is rejected: a schedule that
// does not compile, a producer revision out of order, a definition that
// does not encode.
func (r *Registry) prepare(rec *kgo.Record, spec *sundialv1.JobSpec, prior stored, now time.Time) (store.Job, bool, []jobspec.FieldError) {
	accepted := rec.Timestamp.UTC().Truncate(time.Millisecond)
	var (
		next  time.Time
		sched *schedule.Schedule
	)
	if s := spec.GetSchedule(); s != nil && !spec.GetPaused() {
		var errs []jobspec.FieldError
		sched, errs = jobspec.CompileSchedule(s, accepted)
		if len(errs) > 0 {
			return store.Job{}, false, errs
		}
		next, _ = jobspec.FirstDue(sched, jobspec.MisfirePolicy(s), jobspec.CatchUpWindow(s), accepted, now)
	}
	var resumed bool
	if !spec.GetPaused() {
		next, resumed = r.resumeNext(rec, spec, prior, sched, next, now)
	}

	value, err := (proto.MarshalOptions{Deterministic: true}).Marshal(spec)
	if err != nil { // a decoded message always encodes; say so if not
		return store.Job{}, false, []jobspec.FieldError{{Field: "record", Reason: fmt.Sprintf("cannot encode the definition: %v", err)}}
	}
	job := store.Job{ID: spec.GetId(), Spec: value, Revision: r.revision(rec), UpdatedAt: rec.Timestamp, NextDue: next}

	// What is in force matters only for a producer revision.
	if spec.Revision != nil {
		inForce := prior.found && !prior.job.Deleted && prior.job.Revision < job.Revision // else a replay: the store answers
		if inForce {
			old := r.decodeStored(prior.job)
			if fe, bad := checkRevision(spec, old, store.SpecHash(value), prior.job.Hash); bad {
				return store.Job{}, false, []jobspec.FieldError{fe}
			}
		}
	}
	return job, resumed, nil
}

// unchanged is the verdict on a definition identical to the one stored.
func (r *Registry) unchanged(ctx context.Context, spec *sundialv1.JobSpec, job store.Job, now time.Time) (verdict, error) {
	v := verdict{outcome: sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UNCHANGED}
	if !spec.GetPaused() {
		// A registry that died while resuming the job left part of its
		// held entries behind.
		if err := r.release(ctx, job.ID); err != nil {
			return verdict{}, err
		}
	}
	// This very record may have been applied by a process that died before
	// waking the dispatcher. Waking again is safe only while the entry has
	// not fired yet: a wake-up for a fired entry fires it again.
	stored, found, err := r.getJob(ctx, job.ID)
	if err != nil {
		return verdict{}, err
	}
	if found && !stored.Deleted && !stored.NextDue.IsZero() && stored.NextDue.After(now) {
		v.next = stored.NextDue
		if stored.Revision == job.Revision {
			v.wake = []store.DueEntry{stored.ScheduledEntry()}
		}
	}
	return v, nil
}

// verdict is what handling one definition or delete decided: an outcome,
// or the field errors of a rejection; the next due time the answer
// reports; and the entries whose dispatchers must be woken.
type verdict struct {
	outcome sundialv1.DefinitionOutcome
	errs    []jobspec.FieldError // a rejection when not empty
	next    time.Time            // zero: none reported
	wake    []store.DueEntry
}

// rejected is the verdict of a definition refused for errs.
func rejected(errs ...jobspec.FieldError) verdict { return verdict{errs: errs} }

// answer writes v into st, the one place an answer is filled: a rejection
// (counted by field), or the outcome, accepted unless STALE, with the next
// due time.
func (r *Registry) answer(st *sundialv1.JobStatus, v verdict) {
	if len(v.errs) > 0 {
		r.reject(st, v.errs)
		return
	}
	st.Outcome = v.outcome
	st.Accepted = v.outcome != sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_STALE
	if !v.next.IsZero() {
		st.NextDueTime = timestamppb.New(v.next)
	}
}

// decodeStored decodes the definition in force, or returns nil (and logs)
// when it does not decode.
func (r *Registry) decodeStored(stored store.Job) *sundialv1.JobSpec {
	old := &sundialv1.JobSpec{}
	if err := proto.Unmarshal(stored.Spec, old); err != nil {
		r.cfg.Logger.Warn("stored definition does not decode; ignoring its revision", "job", stored.ID, "err", err)
		return nil
	}
	return old
}

// checkRevision applies the producer's revision rules against the
// definition in force (old, nil when it has none or does not decode).
func checkRevision(spec, old *sundialv1.JobSpec, hash, oldHash []byte) (jobspec.FieldError, bool) {
	if spec.Revision == nil || old == nil || old.Revision == nil {
		return jobspec.FieldError{}, false
	}
	have, want := old.GetRevision(), spec.GetRevision()
	switch {
	case want < have:
		return jobspec.FieldError{Field: "revision", Reason: fmt.Sprintf("%d is lower than the revision in force, %d: an older definition arrived after a newer one", want, have)}, true
	case want == have && string(hash) != string(oldHash):
		return jobspec.FieldError{Field: "revision", Reason: fmt.Sprintf("%d is the revision in force, but the definition differs from it: increase the revision with every change", want)}, true
	}
	return jobspec.FieldError{}, false
}

// lookup reads what the store holds for job id through the grouped reads
// (lookups), retrying transient errors until ctx ends.
func (r *Registry) lookup(ctx context.Context, id string) (stored, error) {
	var prior stored
	err := r.retry(ctx, "get_job", func() (err error) {
		prior, err = r.lookups.do(ctx, id)
		return err
	})
	return prior, err
}

func (r *Registry) getJob(ctx context.Context, id string) (store.Job, bool, error) {
	var (
		job   store.Job
		found bool
	)
	err := r.retry(ctx, "get_job", func() error {
		j, err := r.cfg.Store.GetJob(ctx, id)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		job, found = j, err == nil
		return nil
	})
	return job, found, err
}

// statusRecord encodes st in enc, keyed by the original record key.
func (r *Registry) statusRecord(rec *kgo.Record, enc sundialv1.Encoding, st *sundialv1.JobStatus) *kgo.Record {
	if r.cfg.StatusEncoding == sundialv1.EncodingJSON {
		enc = sundialv1.EncodingJSON
	}
	out, err := jobspec.StatusRecord(r.cfg.Topics.JobsStatus(), rec, enc, st)
	if err != nil {
		r.cfg.Logger.Error("answering with a status that says it could not be encoded", "err", err)
	}
	return out
}

// revision is the revision of the definition in rec: its offset, placed
// after every shared-topic revision when rec comes from a team's topic
// (topics.Names.Revision, the one rule).
func (r *Registry) revision(rec *kgo.Record) int64 {
	return r.cfg.Topics.Revision(rec.Topic, rec.Offset)
}
