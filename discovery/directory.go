package discovery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/internal/deps"
	"github.com/sundialhq/sundial/internal/lifecycle"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// DirectoryConfig configures a Directory.
type DirectoryConfig struct {
	// Kafka are the client options (seed brokers, TLS, SASL). Required.
	Kafka []kgo.Opt
	// Topics names the topics.
	Topics topics.Names
	// ExpiryFactor is how many of its heartbeat intervals a member stays
	// live after its last heartbeat. Default DefaultExpiryFactor.
	ExpiryFactor int
	// DeadRetention is how long after its last heartbeat a member that
	// left or expired stays listed. Default DefaultDeadRetention.
	DeadRetention time.Duration
	// Tick is how often expiries are checked; it adds to the expiry bound.
	// Default DefaultTick.
	Tick time.Duration
	// Pools are pools whose live count is reported (0) even before any
	// member of theirs was seen, so that an empty pool raises its alert.
	Pools []string
	// Registerer receives the live-members gauge. Nil registers nothing.
	Registerer prometheus.Registerer
	// Logger logs; nil discards.
	Logger *slog.Logger
	// Now is the clock expiries are measured by. Default time.Now.
	Now func() time.Time
}

func (c DirectoryConfig) withDefaults() DirectoryConfig {
	c.ExpiryFactor = cmp.Or(c.ExpiryFactor, DefaultExpiryFactor)
	c.DeadRetention = cmp.Or(c.DeadRetention, DefaultDeadRetention)
	c.Tick = cmp.Or(c.Tick, DefaultTick)
	c.Logger = deps.Logger(c.Logger)
	c.Now = deps.Clock(c.Now)
	return c
}

// Validate reports every invalid field, after defaults.
func (c DirectoryConfig) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("directory config: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if len(c.Kafka) == 0 {
		bad("Kafka", "is required (at least kgo.SeedBrokers)")
	}
	if c.ExpiryFactor < 2 {
		bad("ExpiryFactor", "%d is below 2: one late heartbeat would drop a healthy member", c.ExpiryFactor)
	}
	if c.DeadRetention <= 0 {
		bad("DeadRetention", "%s is not positive", c.DeadRetention)
	}
	if c.Tick <= 0 {
		bad("Tick", "%s is not positive", c.Tick)
	}
	for i, p := range c.Pools {
		if p == "" {
			bad(fmt.Sprintf("Pools[%d]", i), "is empty")
		}
	}
	return errors.Join(errs...)
}

// Directory keeps the set of executors from sundial.executors. Its reads
// (Live, Member, All) are safe for concurrent use and return copies.
type Directory struct {
	cfg  DirectoryConfig
	live *prometheus.GaugeVec

	mu     sync.Mutex
	table  *Table
	pools  map[string]bool // every pool reported by the gauge
	synced chan struct{}   // closed once the topic's history is read

	changes chan struct{}
	life    lifecycle.Lifecycle
	started bool // Start was called once: synced cannot be reopened
}

// NewDirectory validates cfg and registers the gauge. It does no I/O.
func NewDirectory(cfg DirectoryConfig) (*Directory, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	d := &Directory{
		cfg: cfg,
		live: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sundial_executors_live",
			Help: "Live executors per pool, as this process's directory of sundial.executors sees them.",
		}, []string{"pool"}),
		table:   NewTable(cfg.ExpiryFactor, cfg.DeadRetention),
		pools:   map[string]bool{},
		synced:  make(chan struct{}),
		changes: make(chan struct{}, 1),
	}
	for _, p := range cfg.Pools {
		d.pools[p] = true
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(d.live); err != nil {
			return nil, fmt.Errorf("directory: register metrics: %w", err)
		}
	}
	d.updateGaugeLocked()
	return d, nil
}

// Start reads the topic's end offsets, then consumes it from the start in
// an owned goroutine; Synced is closed once what existed at Start is read.
// ctx bounds the start only. A Directory is started once; a second Start
// fails.
func (d *Directory) Start(ctx context.Context) error {
	return d.life.Start(ctx, func(ctx context.Context, run *lifecycle.Run) error {
		if d.started {
			return errors.New("directory: started once already")
		}
		d.started = true
		topic := d.cfg.Topics.Executors()
		cl, err := kgo.NewClient(append(append([]kgo.Opt{}, d.cfg.Kafka...),
			kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxWait(500*time.Millisecond),
		)...)
		if err != nil {
			return fmt.Errorf("directory: kafka client: %w", err)
		}
		run.OnStop(cl.Close)
		adm := kadm.NewClient(cl)
		starts, err := adm.ListStartOffsets(ctx, topic)
		if err != nil {
			return fmt.Errorf("directory: start offsets of %s: %w", topic, err)
		}
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return fmt.Errorf("directory: end offsets of %s: %w", topic, err)
		}
		// A partition is read up when a record at end-1 or later arrives;
		// one with nothing between its start and end has nothing to read.
		pending := map[int32]int64{}
		ends.Each(func(o kadm.ListedOffset) {
			if start, ok := starts.Lookup(topic, o.Partition); o.Err == nil && ok && o.Offset > start.Offset {
				pending[o.Partition] = o.Offset
			}
		})
		if len(pending) == 0 {
			close(d.synced)
		}
		run.Go(func(ctx context.Context) { d.consume(ctx, cl, pending) })
		run.Go(d.expireLoop)
		return nil
	})
}

// Stop stops consuming and returns once the goroutines have exited. It is
// idempotent and safe before Start.
func (d *Directory) Stop() { d.life.Stop() }

// Synced is closed once the announcements on the topic at Start have been
// read: from then on Live reflects the fleet, not a partial history.
func (d *Directory) Synced() <-chan struct{} { return d.synced }

// Changes signals a change of the table (a member joined, left, expired, or
// announced new load). It holds at most one pending signal.
func (d *Directory) Changes() <-chan struct{} { return d.changes }

// Live returns the live members of pool ordered by id; of every pool when
// pool is empty.
func (d *Directory) Live(pool string) []Member {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.table.Live(pool)
}

// Member returns the member id, live or not, while it is listed.
func (d *Directory) Member(id string) (Member, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.table.Member(id)
}

// All returns every listed member, live, expired or left, by pool then id.
func (d *Directory) All() []Member {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.table.All()
}

func (d *Directory) consume(ctx context.Context, cl *kgo.Client, pending map[int32]int64) {
	for {
		fs := cl.PollFetches(ctx)
		if fs.IsClientClosed() || ctx.Err() != nil {
			return
		}
		fs.EachError(func(topic string, p int32, err error) {
			d.cfg.Logger.Warn("fetch error", "topic", topic, "partition", p, "err", err)
		})
		now := d.cfg.Now()
		changed := false
		d.mu.Lock()
		fs.EachRecord(func(rec *kgo.Record) {
			changed = d.applyLocked(rec, now) || changed
			if end, ok := pending[rec.Partition]; ok && rec.Offset+1 >= end {
				delete(pending, rec.Partition)
				if len(pending) == 0 {
					close(d.synced)
				}
			}
		})
		if changed {
			d.changedLocked()
		}
		d.mu.Unlock()
	}
}

// applyLocked applies one record and reports whether the table changed.
func (d *Directory) applyLocked(rec *kgo.Record, now time.Time) bool {
	if rec.Value == nil {
		return d.table.Leave(string(rec.Key))
	}
	ann := &sundialv1.ExecutorAnnouncement{}
	if err := decode(rec, ann); err != nil {
		d.cfg.Logger.Warn("skipping a record that is not an announcement", "partition", rec.Partition, "offset", rec.Offset, "err", err)
		return false
	}
	m, ok := memberOf(ann)
	if !ok || m.ID != string(rec.Key) {
		d.cfg.Logger.Warn("skipping an incomplete announcement", "partition", rec.Partition, "offset", rec.Offset, "key", string(rec.Key))
		return false
	}
	return d.table.Announce(m, now)
}

func decode(rec *kgo.Record, m *sundialv1.ExecutorAnnouncement) error {
	ct := ""
	for _, h := range rec.Headers {
		if h.Key == sundialv1.HeaderContentType {
			ct = string(h.Value)
		}
	}
	return sundialv1.Unmarshal(ct, rec.Value, m)
}

func (d *Directory) expireLoop(ctx context.Context) {
	t := time.NewTicker(d.cfg.Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		d.expire(d.cfg.Now())
	}
}

// expire applies the expiries due at now.
func (d *Directory) expire(now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.table.Expire(now) {
		d.changedLocked()
	}
}

func (d *Directory) changedLocked() {
	d.updateGaugeLocked()
	select {
	case d.changes <- struct{}{}:
	default:
	}
}

// updateGaugeLocked reports every pool ever seen, 0 when none of its
// members is live: a pool emptied by crashes must read 0, not vanish.
func (d *Directory) updateGaugeLocked() {
	counts := d.table.LiveCounts()
	for p := range counts {
		d.pools[p] = true
	}
	for p := range d.pools {
		d.live.WithLabelValues(p).Set(float64(counts[p]))
	}
}

// Snapshot reads the topic once, up to its end at the call, and returns
// every listed member (live, expired or left) by pool then id: what a
// one-shot reader such as `sundial executors list` needs. A long-running
// reader (the control plane's cluster view, routing) keeps a Directory
// instead and calls Live.
func Snapshot(ctx context.Context, cfg DirectoryConfig) ([]Member, error) {
	d, err := NewDirectory(cfg)
	if err != nil {
		return nil, err
	}
	if err := d.Start(ctx); err != nil {
		return nil, err
	}
	defer d.Stop()
	select {
	case <-d.Synced():
	case <-ctx.Done():
		return nil, fmt.Errorf("read %s: %w", cfg.Topics.Executors(), context.Cause(ctx))
	}
	// Expiries are applied by the tick; apply them now so that a member
	// read from the history is not listed live for a tick.
	d.expire(d.cfg.Now())
	return d.All(), nil
}
