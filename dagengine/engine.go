package dagengine

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

	"github.com/sundialhq/sundial/dagengine/dag"
	"github.com/sundialhq/sundial/dagengine/dagrun"
	"github.com/sundialhq/sundial/internal/backoff"
	"github.com/sundialhq/sundial/internal/consume"
	"github.com/sundialhq/sundial/internal/deps"
	"github.com/sundialhq/sundial/internal/deps/metricdeps"
	"github.com/sundialhq/sundial/internal/lifecycle"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// Default consumer groups.
const (
	// DefaultGroup consumes sundial.events.
	DefaultGroup = "sundial-dagengine"
	// DefaultDefinitionsGroup consumes the DAG records of sundial.jobs.
	DefaultDefinitionsGroup = "sundial-dagengine-definitions"
	// DefaultSessionTimeout is the consumer groups' session timeout.
	DefaultSessionTimeout = 6 * time.Second
)

// Config configures an Engine.
type Config struct {
	// Kafka are the options of every Kafka client of the engine: the seed brokers
	// (kgo.SeedBrokers) and the connection's TLS and SASL, as
	// connect.Kafka.Options builds them from the command's flags. Required. The engine sets
	// its own group, topic and commit options after them.
	Kafka []kgo.Opt
	// ClientOptions, if set, returns further options for one of the
	// engine's consumers by name ("events", "definitions"): per-client
	// hooks such as metrics, which must not be shared between clients.
	ClientOptions func(client string) []kgo.Opt
	// Topics names the topics (a prefix in tests).
	Topics topics.Names
	// Group consumes sundial.events; every engine instance joins it.
	// Default DefaultGroup.
	Group string
	// DefinitionsGroup consumes sundial.jobs and the team topics
	// sundial.jobs.<team> for DAG definitions. Default
	// DefaultDefinitionsGroup.
	DefinitionsGroup string
	// SharedTopic makes the engine read DAG definitions from sundial.jobs
	// too (see registry.Config.SharedTopic). Default false: the team topics
	// only, and ownership enforced; set, the start-up log warns.
	SharedTopic bool
	// TopicRefresh is how often the engine looks for new team topics.
	// Default 30s.
	TopicRefresh time.Duration
	// SessionTimeout is the session timeout of both consumer groups: how
	// long after an instance dies (killed, cut off) its partitions move to
	// the other instances, or to the instance that restarts in its place.
	// Until then the events of those partitions wait. The broker bounds it
	// (group.min.session.timeout.ms, 6s by default). The heartbeat interval
	// is a third of it, at most 3s. Default DefaultSessionTimeout.
	SessionTimeout time.Duration
	// GroupInstanceID, when set, makes the instance a static member of
	// both consumer groups (kgo.InstanceID): one that crashes and restarts
	// under the same id within SessionTimeout gets its partitions back at
	// once, with no rebalance; a Stop still leaves (consume.LeaveStatic).
	// Every instance needs its own id (a pod name). Default dynamic
	// membership.
	GroupInstanceID string
	// Store holds definitions and DAG-run state. Required.
	Store Store
	// Enqueuer makes node runs due (*enqueue.Enqueuer). Required.
	Enqueuer Enqueuer
	// Producer publishes DagRunEvents and definition statuses; a
	// *kgo.Client, for example the Enqueuer's. Required.
	Producer Producer
	// Shards is S, the cluster's shard count (store.GetClusterConfig).
	// Required.
	Shards int
	// Options bound DAG definitions; the zero value means the defaults.
	Options dag.Options
	// Concurrency is how many DAG runs (or definitions) are processed, or
	// scheduled DAG runs started, at once. Default 32.
	Concurrency int
	// MaxPoll bounds the DAG records of sundial.jobs taken from Kafka at
	// once. Default 2000.
	MaxPoll int
	// EventsMaxPoll bounds the records of sundial.events taken from Kafka
	// at once. A poll's DAG runs are saved before the next poll (offsets
	// are committed per poll), so the engine reads at most this many events
	// per round of conditional writes: at 1,000 runs/s, four events each,
	// and a store that takes a second per write, 2,000 a poll fall behind
	// for good. Nearly every event belongs to a run outside any DAG and
	// costs next to nothing (dagNodeEvent), so a poll may be large; it
	// takes only what the client has already fetched. Default 50000.
	EventsMaxPoll int
	// SweepInterval is how often the engine visits every unfinished DAG
	// run (to time out nodes whose deadline no instance is tracking, and to
	// finish work a dead instance left) and re-reads the DAG definitions
	// for their schedules. Default 30s.
	SweepInterval time.Duration
	// RedriveAfter is how long work another instance saved but has not
	// acknowledged (nodes to start, events to publish) is left to it before
	// this instance redoes it. Default 10s. See RunsConfig.
	RedriveAfter time.Duration
	// RetryMin and RetryMax bound the backoff between retries of a
	// transient store or Kafka error, and between failed starts of a
	// scheduled DAG run. Defaults 50ms and 5s.
	RetryMin, RetryMax time.Duration
	// Registerer receives the metrics. Default: a registry of its own.
	Registerer prometheus.Registerer
	// Logger; nil discards.
	Logger *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
	// EventEncoding is how the events it writes to sundial.events are
	// encoded: binary protobuf (the zero value) or, for people and tools
	// reading the topic, JSON (the content-type header says which; every
	// reader takes both).
	EventEncoding sundialv1.Encoding
	// StatusEncoding: DAG definitions are answered on sundial.jobs.status
	// in JSON when it is EncodingJSON, else in the encoding each arrived in.
	StatusEncoding sundialv1.Encoding
}

func (c Config) withDefaults() Config {
	c.Group = cmp.Or(c.Group, c.Topics.Group(DefaultGroup))
	c.DefinitionsGroup = cmp.Or(c.DefinitionsGroup, c.Topics.Group(DefaultDefinitionsGroup))
	c.SessionTimeout = cmp.Or(c.SessionTimeout, DefaultSessionTimeout)
	c.Concurrency = cmp.Or(c.Concurrency, 32)
	c.MaxPoll = cmp.Or(c.MaxPoll, 2000)
	c.EventsMaxPoll = cmp.Or(c.EventsMaxPoll, 50000)
	c.SweepInterval = cmp.Or(c.SweepInterval, 30*time.Second)
	c.TopicRefresh = cmp.Or(c.TopicRefresh, 30*time.Second)
	c.RetryMin = cmp.Or(c.RetryMin, 50*time.Millisecond)
	c.RetryMax = cmp.Or(c.RetryMax, 5*time.Second)
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
		errs = append(errs, errors.New("dagengine config: kafka: required (at least kgo.SeedBrokers)"))
	}
	if c.Store == nil {
		errs = append(errs, errors.New("dagengine config: store: required"))
	}
	if c.Enqueuer == nil {
		errs = append(errs, errors.New("dagengine config: enqueuer: required"))
	}
	if c.Producer == nil {
		errs = append(errs, errors.New("dagengine config: producer: required"))
	}
	if c.Shards <= 0 {
		errs = append(errs, fmt.Errorf("dagengine config: shards %d: must be positive", c.Shards))
	}
	if c.Group == c.DefinitionsGroup {
		errs = append(errs, fmt.Errorf("dagengine config: group and definitions group are both %q: they consume different topics", c.Group))
	}
	if c.SessionTimeout < time.Second {
		errs = append(errs, fmt.Errorf("dagengine config: session timeout %s: at least 1s", c.SessionTimeout))
	}
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("dagengine config: concurrency %d: must be positive", c.Concurrency))
	}
	if c.MaxPoll < 1 {
		errs = append(errs, fmt.Errorf("dagengine config: max poll %d: must be positive", c.MaxPoll))
	}
	if c.EventsMaxPoll < 1 {
		errs = append(errs, fmt.Errorf("dagengine config: events max poll %d: must be positive", c.EventsMaxPoll))
	}
	if c.SweepInterval < time.Second {
		errs = append(errs, fmt.Errorf("dagengine config: sweep interval %s: at least 1s", c.SweepInterval))
	}
	if c.TopicRefresh < time.Second {
		errs = append(errs, fmt.Errorf("dagengine config: topic refresh %s: at least 1s", c.TopicRefresh))
	}
	if c.RetryMin <= 0 || c.RetryMax < c.RetryMin {
		errs = append(errs, fmt.Errorf("dagengine config: retry backoff %s..%s: want 0 < min <= max", c.RetryMin, c.RetryMax))
	}
	if err := c.Options.Limits.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("dagengine config: %w", err))
	}
	return errors.Join(errs...)
}

// Engine is the DAG engine: it consumes DAG definitions and run events,
// starts DAG runs on their schedules, and drives each DAG run through Runs.
// See the package doc.
type Engine struct {
	cfg   Config
	runs  *Runs
	timer *deadlines
	sched *scheduler

	life lifecycle.Lifecycle
}

// New returns an Engine, or every configuration error. It registers the
// metrics.
func New(cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	runs, err := NewRuns(RunsConfig{
		Store: cfg.Store, Enqueuer: cfg.Enqueuer, Producer: cfg.Producer, Topics: cfg.Topics, Shards: cfg.Shards,
		Options: cfg.Options, RedriveAfter: cfg.RedriveAfter, Registerer: cfg.Registerer, Logger: cfg.Logger, Now: cfg.Now,
		EventEncoding: cfg.EventEncoding,
	})
	if err != nil {
		return nil, err
	}
	e := &Engine{cfg: cfg, runs: runs, timer: newDeadlines()}
	runs.observe = e.observe
	e.sched = newScheduler(e)
	return e, nil
}

// Runs returns the engine's Runs, for triggering and resuming in process.
func (e *Engine) Runs() *Runs { return e.runs }

// observe tracks the deadline of a run the engine has touched.
func (e *Engine) observe(id string, st *dagrun.State) {
	if d := st.NextDeadline(); st.Active() && !d.IsZero() {
		e.timer.set(id, d)
		return
	}
	e.timer.remove(id)
}

// Start joins the consumer groups and starts the loops: run events, DAG
// definitions, schedules, deadlines and the sweep. It returns once they
// run; Stop ends them. ctx bounds the start only. A stopped Engine may be
// started again.
func (e *Engine) Start(ctx context.Context) error {
	if err := e.life.Start(ctx, e.start); err != nil {
		return fmt.Errorf("dagengine: %w", err)
	}
	return nil
}

func (e *Engine) start(_ context.Context, run *lifecycle.Run) error {
	events, err := e.client("events", consume.GroupOptions(e.cfg.Group, e.cfg.Topics.Events()))
	if err != nil {
		return err
	}
	run.OnStop(func() { e.leave(events, e.cfg.Group) })
	patterns, exclude := e.cfg.Topics.JobsTopicPatterns(e.cfg.SharedTopic)
	defs, err := e.client("definitions", consume.RegexGroupOptions(e.cfg.DefinitionsGroup, e.cfg.TopicRefresh, patterns, exclude))
	if err != nil {
		return err
	}
	run.OnStop(func() { e.leave(defs, e.cfg.DefinitionsGroup) })

	defLoop := &consume.Loop{
		Client: defs, Handle: e.handleDefinition, Concurrency: e.cfg.Concurrency, MaxPoll: e.cfg.MaxPoll,
		Backoff: e.backoff("commit"), Logger: e.cfg.Logger,
	}
	run.Go(func(ctx context.Context) { e.eventsLoop(ctx, events) })
	run.Go(defLoop.Run)
	run.Go(e.sched.run)
	run.Go(e.timerLoop)
	run.Go(e.sweepLoop)
	e.cfg.Logger.Info("dag engine started", "events", e.cfg.Topics.Events(), "group", e.cfg.Group,
		"definitions", patterns, "definitions_group", e.cfg.DefinitionsGroup, "ownership_enforced", !e.cfg.SharedTopic)
	if e.cfg.SharedTopic {
		e.cfg.Logger.Warn("ownership is not enforced: whoever may write the shared topic may define, change or delete any team's DAG",
			"shared_topic", e.cfg.Topics.Jobs())
	}
	return nil
}

func (e *Engine) client(name string, group []kgo.Opt) (*kgo.Client, error) {
	opts := slices.Clone(e.cfg.Kafka)
	if e.cfg.ClientOptions != nil {
		opts = append(opts, e.cfg.ClientOptions(name)...)
	}
	opts = append(opts, group...)
	opts = append(opts, kgo.SessionTimeout(e.cfg.SessionTimeout), kgo.HeartbeatInterval(min(3*time.Second, e.cfg.SessionTimeout/3)))
	if e.cfg.GroupInstanceID != "" {
		opts = append(opts, kgo.InstanceID(e.cfg.GroupInstanceID))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka client for %s: %w", name, err)
	}
	return cl, nil
}

// leave ends the membership of cl in group and closes it; a static member
// leaves too, since a stop is not a crash (consume.LeaveStatic).
func (e *Engine) leave(cl *kgo.Client, group string) {
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.SessionTimeout)
	defer cancel()
	if err := consume.LeaveStatic(ctx, cl, group, e.cfg.GroupInstanceID); err != nil {
		e.cfg.Logger.Warn("leaving the group failed; the group drops this member after the session timeout", "group", group, "err", err)
	}
}

// Stop ends the loops, waits for them and leaves the consumer groups. What
// was processed but not committed is processed again by another instance,
// which is harmless. Stop is idempotent, safe before Start, and returns once
// every loop has exited.
func (e *Engine) Stop() { e.life.Stop() }

func (e *Engine) backoff(op string) backoff.Config {
	return backoff.Config{
		Min: e.cfg.RetryMin,
		Max: e.cfg.RetryMax,
		OnRetry: func(err error) {
			e.runs.m.retries.WithLabelValues(op).Inc()
			e.cfg.Logger.Warn("retrying after a transient error", "op", op, "err", err)
		},
	}
}

// retry runs fn until it succeeds or ctx ends.
func (e *Engine) retry(ctx context.Context, op string, fn func() error) error {
	return backoff.Retry(ctx, e.backoff(op), fn)
}
