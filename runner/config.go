package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sundialhq/sundial/checkpoint"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/sundialhq/sundial/discovery"
	"github.com/sundialhq/sundial/internal/deps"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/jobspec"
	"github.com/sundialhq/sundial/leasing"
	"github.com/sundialhq/sundial/logtail"
	"github.com/sundialhq/sundial/runner/breaker"
	"github.com/sundialhq/sundial/runner/egress"
	"github.com/sundialhq/sundial/runner/priority"
	"github.com/sundialhq/sundial/runner/target"
	"github.com/sundialhq/sundial/store"
)

// Enqueuer makes due entries durable and wakes the dispatcher that fires
// them; package enqueue implements it. The runner writes retries and
// deferrals through it.
type Enqueuer interface {
	Enqueue(ctx context.Context, entries ...store.DueEntry) error
}

// Defaults of Config.
const (
	DefaultGroup = "sundial-runners"
	// DefaultConcurrency suits I/O-bound targets (HTTP calls that mostly
	// wait): a worker costs a goroutine while it waits.
	DefaultConcurrency            = 256
	DefaultMaxPendingPerPartition = 10000
	DefaultMinQueueCapacity       = 1024
	DefaultCommitInterval         = time.Second
	DefaultRunTimeout             = 30 * time.Second
	DefaultQueueDelay             = time.Second
	DefaultWaitBound              = 2 * time.Second
	DefaultStartedDelay           = time.Second
	DefaultHeldRetry              = 200 * time.Millisecond
	DefaultReplaceGrace           = 2 * time.Second
	DefaultShutdownTimeout        = 30 * time.Second
	DefaultKeyPrefix              = "sundial:runner:"
	DefaultFanoutRetention        = 7 * 24 * time.Hour
	// DefaultSessionTimeout and DefaultHeartbeatInterval detect a dead
	// runner in about 10s (Kafka's own default session is 45s), so its
	// partitions move to the others sooner.
	DefaultSessionTimeout    = 6 * time.Second
	DefaultHeartbeatInterval = time.Second
	// allowLimit is the concurrency limit asked of leasing for the overlap
	// policy ALLOW: no limit in practice, while the lease still brings the
	// dedupe mark and the fencing token.
	allowLimit = 1 << 20
)

// Config configures a Runner. The zero value of every field but Kafka,
// Leases, Redis and Enqueuer means its default.
type Config struct {
	// ID names this runner in events and dead letters. Default
	// "<hostname>-<pid>".
	ID string
	// Kafka are the client options every Kafka client of the runner starts
	// from: seed brokers, TLS, SASL. Required (at least kgo.SeedBrokers).
	// The runner adds its own consumer group and producer options.
	Kafka []kgo.Opt
	// ProducerKafka and ConsumerKafka are added after Kafka to the
	// options of the runner's producer (events, dead letters, Kafka
	// targets) and of its group consumer (runs) only: per-client hooks such
	// as metrics (one kprom instance describes one client).
	ProducerKafka []kgo.Opt
	ConsumerKafka []kgo.Opt
	// Topics names the topics (a prefix in tests).
	Topics topics.Names
	// Group is the consumer group of the runners. Default DefaultGroup.
	Group string
	// SessionTimeout is how long the group waits for a silent runner
	// before it gives the runner's partitions to the others (a crashed
	// runner's runs wait at least this long). HeartbeatInterval is how
	// often the runner tells the group it is alive; it must be below
	// SessionTimeout (a third or less is usual). Defaults
	// DefaultSessionTimeout and DefaultHeartbeatInterval. They override
	// kgo.SessionTimeout and kgo.HeartbeatInterval given in Kafka or
	// ConsumerKafka.
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
	// InstanceID, when set, makes this runner a static member of the
	// group (kgo.InstanceID): a runner that restarts with the same id
	// within SessionTimeout (after a crash) gets its partitions back
	// without a rebalance of the others; a runner that stops still leaves
	// the group (consume.LeaveStatic), so a rolling update does not leave
	// its partitions idle for SessionTimeout. Every runner of the group
	// needs its own id. Default: dynamic membership.
	InstanceID string
	// Leases takes the leases. Required.
	Leases *leasing.Store
	// Redis carries the replace signal (a pub/sub channel and a marker key
	// per replaced run). Use the same Redis as Leases. Required.
	Redis redis.UniversalClient
	// KeyPrefix starts the runner's own Redis keys and channel. It must not
	// contain '{' or '}'. Default DefaultKeyPrefix.
	KeyPrefix string
	// LogTail bounds what the runner ships of its running attempts' logs
	// to Redis for live tails (package logtail): how often, how much per
	// write and per attempt, and how long Redis keeps it. Zero fields are
	// logtail's defaults.
	LogTail logtail.Bounds
	// Enqueuer writes retries and deferrals as due entries. Required.
	Enqueuer Enqueuer
	// Checkpoints keeps the checkpoints handlers save and the runs
	// suspended (suspend.go). Optional: without it a handler's checkpoint
	// calls fail and runs are never suspended.
	Checkpoints checkpoint.Store
	// TeamQuotas gives the quota of each team (a quota.Cache): a run whose
	// team has MaxConcurrentRuns runs executing is deferred by
	// TeamQuotaDelay (teamquota.go). Optional: nil enforces none.
	TeamQuotas TeamQuotas
	// TeamQuotaDelay is how long a run over its team's concurrent runs is
	// deferred at least; runs spread over one to two times it (Jitter).
	// Default DefaultQueueDelay.
	TeamQuotaDelay time.Duration
	// TeamQueueCapacity is how many of one team's fetched runs count
	// against QueueCapacity, so that one team's herd cannot fill the queue
	// and pause the topic for every team; what a team holds beyond it is
	// bounded by MaxPendingPerPartition. Default QueueCapacity/4.
	TeamQueueCapacity int

	// Handlers are the in-process handlers, by the name HandlerTarget uses.
	Handlers map[string]target.Handler
	// Remote executes handler runs on workers outside the process (a
	// worker gateway, package gateway): a handler run whose name is not in
	// Handlers executes there when Remote serves its team and handler.
	// Nil: only Handlers execute here.
	Remote Remote
	// DirectOnly makes the runner consume its directed topic (and the
	// adopted ones of its pool) only, not the runs topics: it executes
	// only what other runners route to it. A worker gateway runs so, in a
	// consumer group of its own.
	DirectOnly bool
	// Exec runs exec targets: the commands an operator allows by name. Nil
	// refuses them (dead-lettered as "exec_not_allowed").
	Exec *target.Exec
	// HTTPTransport builds the transport of each team's HTTP calls around
	// the team's egress-checked dialer (no timeout of its own: the job's
	// applies). Default: target.PooledTransport(Concurrency), clones of
	// http.DefaultTransport that keep up to Concurrency idle connections,
	// in all and per downstream host, so that workers reuse connections
	// instead of dialling anew (http.DefaultTransport keeps two per host).
	HTTPTransport target.TransportFunc
	// Egress is what each team's runs may reach: HTTP addresses, Kafka
	// topics, commands (package runner/egress). Its Pool and TopicPrefix
	// are set from Pool and Topics.Prefix. The zero value is the default
	// policy: no private, loopback or link-local address, a team's own
	// topics (<team>.*) only, no command.
	Egress egress.Config
	// Secrets resolves the secret references of HTTP targets, each for
	// its job's owner team (target.SecretsDir). Nil: a target with a
	// reference fails, not retried.
	Secrets target.Secrets
	// Breakers configures the circuit breakers, one per team and
	// downstream; its Registerer and Logger default to the runner's.
	Breakers breaker.Config

	// Concurrency is the number of workers, the most runs executing at
	// once. Default DefaultConcurrency.
	Concurrency int

	// Pool is the pool this runner serves, in its announcements. Default
	// discovery.DefaultPool.
	Pool string
	// PoolSlots is how many runs of the pool execute at once on this
	// runner; at most Concurrency (below it for BlockingDiscard). Default
	// Concurrency.
	PoolSlots int
	// PoolBlocking is what happens to a run that finds every slot busy.
	// Default BlockingConcurrent.
	PoolBlocking PoolBlocking
	// Labels and Version describe the runner in its announcements.
	Labels  map[string]string
	Version string
	// Directory tells the live executors of each pool, for runs whose job
	// asks for a routing strategy (route.go). Default: the runner reads
	// sundial.executors with a discovery.Directory of its own.
	Directory Directory
	// RouteDelay is how long a routed run that found no live executor (or
	// whose fixed executor is away, under FALLBACK_WAIT) is deferred before
	// it asks again. Default DefaultQueueDelay.
	RouteDelay time.Duration
	// WaitBound is how long a gap of a run's timeline (due → dispatched →
	// received → leased) may be before its events name the wait
	// (RunEvent.wait_reason, package lateness). Default DefaultWaitBound.
	WaitBound time.Duration
	// StartedDelay is how long an attempt's STARTED event is held back: an
	// attempt that ends within it produces its outcome alone, which
	// carries its start (RunEvent.started_time and duration), so most runs
	// cost three records on sundial.events instead of four; a longer one
	// has its STARTED produced when the delay passes, with the time it
	// started. Readers of the topic learn of a start up to this much later
	// (history gathers for a second anyway). Default DefaultStartedDelay;
	// negative: STARTED is produced as the attempt starts.
	StartedDelay time.Duration
	// FanoutRetention is how long Redis keeps what a BROADCAST or SHARDED
	// run records (its broadcast plan and its finished children, fanout.go):
	// a child that finishes later than this after the last one before it
	// starts the count again. Default DefaultFanoutRetention.
	FanoutRetention time.Duration
	// DirectForgetAfter is how long after its last heartbeat a member of
	// the pool that left has its directed topic deleted, once the runners'
	// group has consumed every run in it (forget.go). Keep it below the
	// directory's discovery.DirectoryConfig.DeadRetention. Default
	// DefaultDirectForgetAfter.
	DirectForgetAfter time.Duration
	// AnnounceInterval is how often the runner announces itself on
	// sundial.executors; readers expire it after three intervals without
	// one. Default discovery.DefaultInterval.
	AnnounceInterval time.Duration
	// MaxInFlight bounds the runs that hold a lease at once: those
	// executing (at most Concurrency) plus those that executed and whose
	// SUCCEEDED event and dedupe mark are being written, which a worker
	// does not wait for. Default 2 * Concurrency; at least Concurrency.
	MaxInFlight int
	// QueueCapacity is how many fetched runs of one priority may wait for a
	// worker. A priority's topic is paused at this many and resumed at half.
	// A resumed topic waits for a new fetch, so a small queue starves the
	// workers under a backlog: with 64 workers on the local stack, a
	// capacity of 128 gave 2,100 runs/s where 1,024 gave 4,800. Default
	// max(2 * Concurrency, DefaultMinQueueCapacity).
	QueueCapacity int
	// MaxPendingPerPartition bounds the offsets tracked for one partition
	// between its commit watermark and its newest fetched record. A
	// partition whose watermark is pinned by a long run is paused at this
	// many and resumed at half. Default DefaultMaxPendingPerPartition.
	MaxPendingPerPartition int
	// Weights are the shares of the high, default and low priority topics
	// among the runs workers pick. Default priority.DefaultWeights.
	Weights [priority.Levels]int
	// Aging is the wait after which a fetched run's weight has doubled.
	// Default priority.DefaultAging.
	Aging time.Duration

	// CommitInterval is how often finished offsets are committed. Default 1s.
	CommitInterval time.Duration
	// RunTimeout is the per-attempt timeout of runs that carry none.
	// Default 30s.
	RunTimeout time.Duration
	// QueueDelay is the wait of OVERLAP_POLICY_QUEUE for runs that carry
	// none. Default 1s.
	QueueDelay time.Duration
	// HeldRetry is how often a run that another holder has leased (a
	// redelivery while the first delivery still executes) asks again.
	// Default 200ms.
	HeldRetry time.Duration
	// ReplaceGrace is how long OVERLAP_POLICY_REPLACE waits for the running
	// execution to stop by the pub/sub signal before it revokes the lease in
	// Redis (after which the slot frees only when the revoked lease
	// expires). Default 2s.
	ReplaceGrace time.Duration
	// ShutdownTimeout is how long Stop lets executing runs finish before it
	// cancels them; a cancelled run is released, not committed, and is
	// redelivered. Default 30s.
	ShutdownTimeout time.Duration

	// Jitter returns the full-jitter draw in [0, 1) for the retry after a
	// failed attempt. Default: a hash of the run id and attempt, so two
	// runners that fail the same attempt schedule the same retry entry
	// (same key, written once) instead of two.
	Jitter func(runID string, attempt uint32) float64

	// Registerer receives the runner's metrics. Nil registers nothing.
	Registerer prometheus.Registerer
	// Logger logs; nil discards.
	Logger *slog.Logger
	// Now is the clock of events and latencies. Default time.Now.
	Now func() time.Time
	// TracerProvider receives the spans of each delivery (runner.run, with
	// runner.lease and runner.attempt), continuing the run's traceparent;
	// the attempt's span goes on to the downstream (traceparent header),
	// and the run's events and log lines name its trace id (package
	// tracing). Nil: tracing off.
	TracerProvider trace.TracerProvider
	// EventEncoding is how the events it writes to sundial.events are
	// encoded: binary protobuf (the zero value) or, for people and tools
	// reading the topic, JSON (the content-type header says which; every
	// reader takes both).
	EventEncoding sundialv1.Encoding
}

func (c Config) withDefaults() Config {
	if c.ID == "" {
		host, _ := os.Hostname()
		c.ID = cmp.Or(host, "runner") + "-" + strconv.Itoa(os.Getpid())
	}
	c.Group = cmp.Or(c.Group, c.Topics.Group(DefaultGroup))
	c.KeyPrefix = cmp.Or(c.KeyPrefix, DefaultKeyPrefix)
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	c.Pool = cmp.Or(c.Pool, discovery.DefaultPool)
	c.PoolSlots = cmp.Or(c.PoolSlots, c.Concurrency)
	c.PoolBlocking = cmp.Or(c.PoolBlocking, BlockingConcurrent)
	c.AnnounceInterval = cmp.Or(c.AnnounceInterval, discovery.DefaultInterval)
	c.QueueCapacity = cmp.Or(c.QueueCapacity, max(2*c.Concurrency, DefaultMinQueueCapacity))
	c.MaxInFlight = cmp.Or(c.MaxInFlight, 2*c.Concurrency)
	c.TeamQueueCapacity = cmp.Or(c.TeamQueueCapacity, max(c.QueueCapacity/4, 1))
	c.TeamQuotaDelay = cmp.Or(c.TeamQuotaDelay, DefaultQueueDelay)
	c.RouteDelay = cmp.Or(c.RouteDelay, DefaultQueueDelay)
	c.DirectForgetAfter = cmp.Or(c.DirectForgetAfter, DefaultDirectForgetAfter)
	c.WaitBound = cmp.Or(c.WaitBound, DefaultWaitBound)
	c.StartedDelay = cmp.Or(c.StartedDelay, DefaultStartedDelay)
	c.FanoutRetention = cmp.Or(c.FanoutRetention, DefaultFanoutRetention)
	c.SessionTimeout = cmp.Or(c.SessionTimeout, DefaultSessionTimeout)
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, DefaultHeartbeatInterval)
	if c.HTTPTransport == nil && c.Concurrency > 0 {
		c.HTTPTransport = target.PooledTransport(c.Concurrency)
	}
	c.Egress.Pool = c.Pool
	c.Egress.TopicPrefix = c.Topics.Prefix
	c.MaxPendingPerPartition = cmp.Or(c.MaxPendingPerPartition, DefaultMaxPendingPerPartition)
	if c.Weights == [priority.Levels]int{} {
		c.Weights = priority.DefaultWeights
	}
	c.Aging = cmp.Or(c.Aging, priority.DefaultAging)
	c.CommitInterval = cmp.Or(c.CommitInterval, DefaultCommitInterval)
	c.RunTimeout = cmp.Or(c.RunTimeout, DefaultRunTimeout)
	c.QueueDelay = cmp.Or(c.QueueDelay, DefaultQueueDelay)
	c.HeldRetry = cmp.Or(c.HeldRetry, DefaultHeldRetry)
	c.ReplaceGrace = cmp.Or(c.ReplaceGrace, DefaultReplaceGrace)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, DefaultShutdownTimeout)
	if c.Jitter == nil {
		c.Jitter = HashJitter
	}
	c.Logger = deps.Logger(c.Logger)
	c.Now = deps.Clock(c.Now)
	if c.Breakers.Registerer == nil {
		c.Breakers.Registerer = c.Registerer
	}
	if c.Breakers.Logger == nil {
		c.Breakers.Logger = c.Logger
	}
	return c
}

// Validate reports every invalid field, after defaults are applied.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("runner config: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if len(c.Kafka) == 0 {
		bad("Kafka", "is required (at least kgo.SeedBrokers)")
	}
	if c.Leases == nil {
		bad("Leases", "is required")
	}
	if c.Redis == nil {
		bad("Redis", "is required")
	}
	if c.Enqueuer == nil {
		bad("Enqueuer", "is required")
	}
	if strings.ContainsAny(c.KeyPrefix, "{}") {
		bad("KeyPrefix", "%q contains '{' or '}'", c.KeyPrefix)
	}
	if err := c.LogTail.Validate(); err != nil {
		bad("LogTail", "%v", err)
	}
	positive := func(field string, v int) {
		if v <= 0 {
			bad(field, "%d is not positive", v)
		}
	}
	positive("Concurrency", c.Concurrency)
	positive("QueueCapacity", c.QueueCapacity)
	if _, err := ParsePoolBlocking(string(c.PoolBlocking)); err != nil {
		bad("PoolBlocking", "%v", err)
	}
	switch {
	case c.PoolSlots <= 0:
		bad("PoolSlots", "%d is not positive", c.PoolSlots)
	case c.PoolBlocking == BlockingDiscard && c.PoolSlots >= c.Concurrency:
		bad("PoolSlots", "%d is not below Concurrency %d: with PoolBlocking discard the workers beyond the slots take the runs to discard", c.PoolSlots, c.Concurrency)
	case c.PoolSlots > c.Concurrency:
		bad("PoolSlots", "%d is above Concurrency %d", c.PoolSlots, c.Concurrency)
	}
	positive("TeamQueueCapacity", c.TeamQueueCapacity)
	if c.RouteDelay <= 0 {
		bad("RouteDelay", "%s is not positive", c.RouteDelay)
	}
	if c.WaitBound <= 0 {
		bad("WaitBound", "%s is not positive", c.WaitBound)
	}
	if c.FanoutRetention <= 0 {
		bad("FanoutRetention", "%s is not positive", c.FanoutRetention)
	}
	if reason := jobspec.CheckExecutorID(c.ID); reason != "" {
		bad("ID", "%q: %s (it names the runner's directed topic)", c.ID, reason)
	}
	if c.TeamQuotaDelay <= 0 {
		bad("TeamQuotaDelay", "%s is not positive", c.TeamQuotaDelay)
	}
	if c.MaxInFlight < c.Concurrency {
		bad("MaxInFlight", "%d is below Concurrency %d", c.MaxInFlight, c.Concurrency)
	}
	if c.HeartbeatInterval >= c.SessionTimeout {
		bad("HeartbeatInterval", "%s is not below SessionTimeout %s", c.HeartbeatInterval, c.SessionTimeout)
	}
	positive("MaxPendingPerPartition", c.MaxPendingPerPartition)
	for i, w := range c.Weights {
		if w <= 0 {
			bad(fmt.Sprintf("Weights[%d]", i), "%d is not positive", w)
		}
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{
		{"Aging", c.Aging}, {"CommitInterval", c.CommitInterval}, {"RunTimeout", c.RunTimeout},
		{"QueueDelay", c.QueueDelay}, {"HeldRetry", c.HeldRetry}, {"ReplaceGrace", c.ReplaceGrace},
		{"ShutdownTimeout", c.ShutdownTimeout}, {"SessionTimeout", c.SessionTimeout},
		{"HeartbeatInterval", c.HeartbeatInterval}, {"AnnounceInterval", c.AnnounceInterval},
		{"DirectForgetAfter", c.DirectForgetAfter},
	} {
		if d.v <= 0 {
			bad(d.field, "%s is not positive", d.v)
		}
	}
	for name, h := range c.Handlers {
		if h == nil {
			bad("Handlers["+strconv.Quote(name)+"]", "is nil")
		}
	}
	if err := c.Egress.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("runner config: Egress: %w", err))
	}
	if err := c.Breakers.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("runner config: Breakers: %w", err))
	}
	return errors.Join(errs...)
}

// HashJitter is the default Config.Jitter: the FNV-1a 64-bit hash of the run
// id and attempt, scaled to [0, 1). Deterministic, so the retry of an attempt
// has one due time whoever computes it.
func HashJitter(runID string, attempt uint32) float64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(runID))
	_, _ = h.Write([]byte{byte(attempt), byte(attempt >> 8), byte(attempt >> 16), byte(attempt >> 24)})
	return float64(h.Sum64()>>11) / float64(uint64(1)<<53)
}
