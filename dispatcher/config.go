package dispatcher

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/sundialhq/sundial/internal/deps"
	"github.com/sundialhq/sundial/internal/deps/metricdeps"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// Defaults of Config.
const (
	DefaultGroupID           = "sundial-dispatchers"
	DefaultLookahead         = 10 * time.Second
	DefaultPrepareAhead      = 500 * time.Millisecond
	DefaultJobFeedMaxLag     = 5 * time.Second
	DefaultJobFeedReplay     = 2 * time.Hour
	DefaultCatchUpHorizon    = 24 * time.Hour
	DefaultMisfireThreshold  = time.Second
	DefaultWatermarkInterval = 5 * time.Second
	DefaultSessionTimeout    = 6 * time.Second
	DefaultHeartbeatInterval = time.Second
	DefaultMaxInflight       = 256
	DefaultMaxBacklog        = 20000
	DefaultMaxFiring         = 4096
	DefaultMaxHeld           = 100000
	DefaultFireTimeout       = 10 * time.Second
	DefaultDrainTimeout      = 5 * time.Second
	DefaultMaxMissedRuns     = 1000
)

// dedupeWindow is how long after its due time a fired entry's key is
// remembered, so that a repeated wake-up (an enqueuer's retry) does not fire
// it again. Memory grows with the entries fired in this window.
const dedupeWindow = 30 * time.Second

// Store is what the dispatcher needs from the store: the schedule, shard
// claims and watermarks, job definitions (to check an entry is live and to
// snapshot the job into its run) and the cluster's shard count.
type Store interface {
	store.Schedule
	store.Held
	store.Shards
	GetJob(ctx context.Context, id string) (store.Job, error)
	GetClusterConfig(ctx context.Context) (store.ClusterConfig, error)
}

// Config configures a Dispatcher. Zero values mean the defaults above.
type Config struct {
	// Kafka are the options of every Kafka client of the dispatcher: the
	// seed brokers (kgo.SeedBrokers) and the connection's TLS and SASL, as
	// connect.Kafka.Options builds them from the command's flags.
	// Required. They must not set the group, topics, balancers, partition
	// callbacks or commit behaviour, nor hooks that keep per-client state
	// (GroupClientOpts).
	Kafka []kgo.Opt
	// GroupClientOpts are further options of the group's client alone
	// (the one that consumes sundial.shards and produces the runs): hooks
	// that keep per-client state, such as kprom's metrics, which must not
	// be shared with the dispatcher's other clients.
	GroupClientOpts []kgo.Opt
	// Store is the schedule store. Required.
	Store Store
	// Topics names sundial.shards and sundial.runs.*.
	Topics topics.Names
	// GroupID is the consumer group of sundial.shards through which the
	// dispatchers share the shards. Default "sundial-dispatchers".
	GroupID string
	// InstanceID names this dispatcher in shard claims (store) and logs.
	// Default host name + "-" + process id.
	InstanceID string
	// Lookahead: a minute bucket is read when now reaches its start minus
	// Lookahead, so its entries are in memory before they fall due. At least
	// 100ms, at most 50s (a bucket is a minute). Default 10s.
	Lookahead time.Duration
	// PrepareAhead: an entry's firing starts this long before its due time
	// (the job is taken from memory, or read, the entry checked to be live,
	// the run built; at the due time the job's revision is checked again); the
	// run is produced at the due time, never before. It takes the store
	// read off the dispatch latency. A definition changed less than this
	// before an occurrence may still fire that occurrence under the old
	// definition (the registry's own processing makes such a change racy
	// anyway). At least 1ms, less than Lookahead and FireTimeout. Default
	// 500ms.
	PrepareAhead time.Duration
	// JobFeedMaxLag: definitions in memory, and the snapshots entries
	// carry, are used only while the jobs feed has applied every change the
	// registry answered up to this long ago; otherwise firings read their
	// jobs from the store. So a change answered more than this before an
	// occurrence is always seen by it; one answered later may miss that one
	// occurrence. On a busy machine a round of the feed (list the end
	// offsets, read to them) takes hundreds of milliseconds, and a bound
	// below that turns every firing into a store read. At least
	// PrepareAhead. Default 5s.
	JobFeedMaxLag time.Duration
	// JobFeedReplay is how far back the jobs feed reads the registry's
	// answers when the dispatcher starts: a snapshot checked within it
	// (less the clock-skew allowance) may be trusted at once, so a
	// restarted dispatcher fires the jobs of every interval up to about
	// this long without reading them. Jobs of longer intervals read their
	// definitions once, as every job did before. The price is reading the
	// answers of that long at start (the compacted sundial.jobs.status
	// holds one a job changed in it), before which the feed is not fresh
	// and firings read their jobs. Default 2h.
	JobFeedReplay time.Duration
	// CatchUpHorizon bounds how far back a new owner reads from the shard's
	// watermark. Entries older than now minus the horizon are never read:
	// occurrences that old are outside every sane catch-up window, but a
	// recurring job whose pending entry is that old stops until it is
	// defined again. At least a minute. Default 24h.
	CatchUpHorizon time.Duration
	// MisfireThreshold: an entry first seen (read or woken) more than this
	// after its due time was missed, and a scheduled one goes through its
	// job's misfire policy. Entries seen in time always fire, however late a
	// busy dispatcher gets to them. Default 1s.
	MisfireThreshold time.Duration
	// WatermarkInterval is how often each shard's watermark is advanced
	// (a lightweight transaction) and metrics are refreshed. Default 5s: at
	// 1s the advances of 128 shards alone kept a third of a core of a
	// single Cassandra node busy (docs/architecture.md §9). A shorter
	// interval notices a fenced owner sooner and re-fires less after a
	// crash; a longer one costs Cassandra less.
	WatermarkInterval time.Duration
	// SessionTimeout is the consumer group session timeout: how long after
	// a dispatcher dies its shards are taken over. Within the brokers'
	// group.min/max.session.timeout.ms (6s-30m by default). Default 6s,
	// the brokers' least (docs/architecture.md, "Failover").
	SessionTimeout time.Duration
	// GroupInstanceID, when set, makes this dispatcher a static member of
	// the group (kgo.InstanceID): one that crashes and restarts under the
	// same id within SessionTimeout gets its shards back at once, with no
	// rebalance; a Stop still leaves the group (consume.LeaveStatic). Every
	// dispatcher of the group needs its own id (a pod name). Default
	// dynamic membership.
	GroupInstanceID string
	// HeartbeatInterval of the group member; less than SessionTimeout.
	// Default 1s.
	HeartbeatInterval time.Duration
	// MaxInflight bounds the firings of one shard in progress at once.
	// Default 256.
	MaxInflight int
	// MaxFiring bounds the firings in progress at once across all the
	// shards of the dispatcher: each owned shard may have its equal share
	// (at least 1, at most MaxInflight). Under overload every firing in
	// progress holds a goroutine and its run records, so this, not the
	// backlog, bounds that memory. Default 4096.
	MaxFiring int
	// MaxHeld bounds the entries the dispatcher holds in memory (waiting or
	// firing) across its shards: each owned shard reads its buckets page by
	// page and takes no further page while it holds its equal share (at
	// least 1). Memory is then MaxHeld entries, plus at most one page of
	// 64 per shard, plus the successors of jobs that recur within the
	// look-ahead, whatever the backlog. A shard that is not behind holds
	// less: it takes no page beyond the look-ahead, so it holds about the
	// rate times Lookahead, and MaxHeld matters for a herd or a catch-up.
	// Default 100000; an entry takes about 1 KiB with its snapshot.
	MaxHeld int
	// MaxBacklog: while catching up, no further past bucket of a shard is
	// read while this many of its entries are in memory. Default 20000.
	MaxBacklog int
	// FireTimeout bounds the planning of one attempt to fire an entry
	// (its job's read), the delivery of its run records (the Kafka client
	// fails a record it could not send within it, and the firing is tried
	// again) and each try to store the next occurrence. A run the client
	// may still deliver is waited for, and once the runs are out the next
	// occurrence's write is tried again until it succeeds: a slow broker
	// or store does not emit a run twice. Only giving the shard up ends
	// those waits. Default 10s.
	FireTimeout time.Duration
	// DrainTimeout: a shard being revoked waits this long for its firings
	// in progress before cancelling them. Default 5s.
	DrainTimeout time.Duration
	// MaxMissedRuns bounds the runs one catch-up of one job fires under
	// MISFIRE_POLICY_FIRE_ALL; the rest follow in later rounds. Default 1000.
	MaxMissedRuns int
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger; nil discards.
	Logger *slog.Logger
	// Registerer receives the metrics. Default a private registry (the
	// metrics are then not exported).
	Registerer prometheus.Registerer
	// TracerProvider receives a span per run fired (dispatcher.fire), the
	// child of the trigger's span for a triggered run, of the runner's for
	// a retry, a root for a scheduled occurrence; the run record carries it
	// (Run.traceparent) to the runner (package tracing). Nil: tracing off.
	TracerProvider trace.TracerProvider
	// EventEncoding is how the events it writes to sundial.events are
	// encoded: binary protobuf (the zero value) or, for people and tools
	// reading the topic, JSON (the content-type header says which; every
	// reader takes both).
	EventEncoding sundialv1.Encoding
}

func (c Config) withDefaults() Config {
	c.GroupID = cmp.Or(c.GroupID, c.Topics.Group(DefaultGroupID))
	if c.InstanceID == "" {
		host, _ := os.Hostname()
		c.InstanceID = cmp.Or(host, "dispatcher") + "-" + strconv.Itoa(os.Getpid())
	}
	c.Lookahead = cmp.Or(c.Lookahead, DefaultLookahead)
	c.PrepareAhead = cmp.Or(c.PrepareAhead, DefaultPrepareAhead)
	c.JobFeedMaxLag = cmp.Or(c.JobFeedMaxLag, max(DefaultJobFeedMaxLag, c.PrepareAhead))
	c.JobFeedReplay = cmp.Or(c.JobFeedReplay, DefaultJobFeedReplay)
	c.CatchUpHorizon = cmp.Or(c.CatchUpHorizon, DefaultCatchUpHorizon)
	c.MisfireThreshold = cmp.Or(c.MisfireThreshold, DefaultMisfireThreshold)
	c.WatermarkInterval = cmp.Or(c.WatermarkInterval, DefaultWatermarkInterval)
	c.SessionTimeout = cmp.Or(c.SessionTimeout, DefaultSessionTimeout)
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, DefaultHeartbeatInterval)
	c.MaxInflight = cmp.Or(c.MaxInflight, DefaultMaxInflight)
	c.MaxBacklog = cmp.Or(c.MaxBacklog, DefaultMaxBacklog)
	c.MaxFiring = cmp.Or(c.MaxFiring, DefaultMaxFiring)
	c.MaxHeld = cmp.Or(c.MaxHeld, DefaultMaxHeld)
	c.FireTimeout = cmp.Or(c.FireTimeout, DefaultFireTimeout)
	c.DrainTimeout = cmp.Or(c.DrainTimeout, DefaultDrainTimeout)
	c.MaxMissedRuns = cmp.Or(c.MaxMissedRuns, DefaultMaxMissedRuns)
	c.Now = deps.Clock(c.Now)
	c.Logger = deps.Logger(c.Logger)
	c.Registerer = metricdeps.Registerer(c.Registerer)
	return c
}

// Validate reports every bad field, after defaults are applied.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("dispatcher config: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if len(c.Kafka) == 0 {
		bad("kafka", "is required (at least kgo.SeedBrokers)")
	}
	if c.Store == nil {
		bad("store", "required")
	}
	if c.Lookahead < 100*time.Millisecond || c.Lookahead > 50*time.Second {
		bad("lookahead", "%s: must be between 100ms and 50s", c.Lookahead)
	}
	if c.PrepareAhead < time.Millisecond || c.PrepareAhead >= c.Lookahead || c.PrepareAhead >= c.FireTimeout {
		bad("prepare ahead", "%s: must be at least 1ms and less than the lookahead %s and the fire timeout %s", c.PrepareAhead, c.Lookahead, c.FireTimeout)
	}
	if c.JobFeedMaxLag < c.PrepareAhead {
		bad("job feed max lag", "%s: must be at least the prepare ahead %s", c.JobFeedMaxLag, c.PrepareAhead)
	}
	if c.JobFeedReplay < 0 {
		bad("job feed replay", "%s: must not be negative", c.JobFeedReplay)
	}
	if c.CatchUpHorizon < time.Minute {
		bad("catch-up horizon", "%s: must be at least 1m", c.CatchUpHorizon)
	}
	if c.MisfireThreshold < 0 {
		bad("misfire threshold", "%s: must not be negative", c.MisfireThreshold)
	}
	if c.WatermarkInterval < 10*time.Millisecond {
		bad("watermark interval", "%s: must be at least 10ms", c.WatermarkInterval)
	}
	if c.SessionTimeout < time.Second {
		bad("session timeout", "%s: must be at least 1s", c.SessionTimeout)
	}
	if c.HeartbeatInterval <= 0 || c.HeartbeatInterval >= c.SessionTimeout {
		bad("heartbeat interval", "%s: must be positive and less than the session timeout %s", c.HeartbeatInterval, c.SessionTimeout)
	}
	for _, n := range []struct {
		field string
		v     int
	}{{"max inflight", c.MaxInflight}, {"max backlog", c.MaxBacklog}, {"max firing", c.MaxFiring}, {"max held", c.MaxHeld}, {"max missed runs", c.MaxMissedRuns}} {
		if n.v < 1 {
			bad(n.field, "%d: must be at least 1", n.v)
		}
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"fire timeout", c.FireTimeout}, {"drain timeout", c.DrainTimeout}} {
		if d.v <= 0 {
			bad(d.field, "%s: must be positive", d.v)
		}
	}
	return errors.Join(errs...)
}
