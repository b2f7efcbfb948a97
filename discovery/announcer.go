package discovery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/internal/deps"
	"github.com/sundialhq/sundial/internal/lifecycle"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// Defaults of the configs.
const (
	DefaultPool     = "default"
	DefaultInterval = 2 * time.Second
	// DefaultExpiryFactor heartbeats may be missed before a member is
	// expired: one lost or late heartbeat does not drop a healthy member.
	DefaultExpiryFactor  = 3
	DefaultDeadRetention = 15 * time.Minute
	DefaultTick          = 500 * time.Millisecond
	// tombstoneTimeout bounds the tombstone's write in Stop.
	tombstoneTimeout = 5 * time.Second
)

// AnnouncerConfig configures an Announcer.
type AnnouncerConfig struct {
	// Kafka are the client options (seed brokers, TLS, SASL). Required.
	Kafka []kgo.Opt
	// Topics names the topics.
	Topics topics.Names
	// ID is the executor id, the key of its announcements. Required.
	ID string
	// Pool is the pool it serves. Default DefaultPool.
	Pool string
	// Labels are free-form operator labels.
	Labels map[string]string
	// Version is the build's version.
	Version string
	// Blocking names the pool's blocking policy on this executor.
	Blocking string
	// Capacity is its slots in the pool. Required, positive.
	Capacity int
	// InFlight returns the runs executing now. Nil announces 0.
	InFlight func() int
	// Handlers returns the handlers it executes, per team, at each
	// announcement. Nil announces none.
	Handlers func() []ServedHandler
	// Interval is the heartbeat interval. Default DefaultInterval.
	Interval time.Duration
	// Logger logs; nil discards.
	Logger *slog.Logger
	// Now is the clock of the heartbeat times. Default time.Now.
	Now func() time.Time
}

func (c AnnouncerConfig) withDefaults() AnnouncerConfig {
	c.Pool = cmp.Or(c.Pool, DefaultPool)
	c.Interval = cmp.Or(c.Interval, DefaultInterval)
	c.Logger = deps.Logger(c.Logger)
	c.Now = deps.Clock(c.Now)
	return c
}

// Validate reports every invalid field, after defaults.
func (c AnnouncerConfig) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("announcer config: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if len(c.Kafka) == 0 {
		bad("Kafka", "is required (at least kgo.SeedBrokers)")
	}
	if c.ID == "" {
		bad("ID", "is required")
	}
	if strings.TrimSpace(c.Pool) != c.Pool {
		bad("Pool", "%q has surrounding spaces", c.Pool)
	}
	if c.Capacity <= 0 {
		bad("Capacity", "%d is not positive", c.Capacity)
	}
	if c.Interval < time.Millisecond {
		bad("Interval", "%s is below 1ms", c.Interval)
	}
	return errors.Join(errs...)
}

// Announcer heartbeats one executor's announcement on sundial.executors
// until Stop, which writes its tombstone.
type Announcer struct {
	cfg     AnnouncerConfig
	started time.Time
	life    lifecycle.Lifecycle
}

// NewAnnouncer validates cfg. It does no I/O.
func NewAnnouncer(cfg AnnouncerConfig) (*Announcer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cfg.Labels = maps.Clone(cfg.Labels)
	return &Announcer{cfg: cfg}, nil
}

// Start creates the producer and starts heartbeating; the first
// announcement is produced at once. ctx bounds the start only.
func (a *Announcer) Start(ctx context.Context) error {
	return a.life.Start(ctx, func(ctx context.Context, run *lifecycle.Run) error {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.DefaultProduceTopic(a.cfg.Topics.Executors())}, a.cfg.Kafka...)...)
		if err != nil {
			return fmt.Errorf("announcer: kafka client: %w", err)
		}
		a.started = a.cfg.Now()
		// The tombstone is written in Stop, after the start's ctx may have
		// ended: it keeps the context's values only.
		stopCtx := context.WithoutCancel(ctx)
		run.OnStop(func() {
			a.tombstone(stopCtx, cl)
			cl.Close()
		})
		run.Go(func(ctx context.Context) { a.loop(ctx, cl) })
		return nil
	})
}

// Stop stops heartbeating and writes the tombstone (waiting up to 5 s for
// it). It is idempotent and safe before Start.
func (a *Announcer) Stop() { a.life.Stop() }

func (a *Announcer) loop(ctx context.Context, cl *kgo.Client) {
	var u usage
	t := time.NewTicker(a.cfg.Interval)
	defer t.Stop()
	for {
		a.announce(ctx, cl, &u)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// announce produces one announcement without waiting: a heartbeat that
// fails is superseded by the next.
func (a *Announcer) announce(ctx context.Context, cl *kgo.Client, u *usage) {
	now := a.cfg.Now()
	cores, mem := u.sample(now)
	inFlight := 0
	if a.cfg.InFlight != nil {
		inFlight = a.cfg.InFlight()
	}
	ann := &sundialv1.ExecutorAnnouncement{
		ExecutorId: a.cfg.ID, Pool: a.cfg.Pool, Labels: a.cfg.Labels, Version: a.cfg.Version, Blocking: a.cfg.Blocking,
		Capacity: uint32(a.cfg.Capacity), InFlight: uint32(max(inFlight, 0)), CpuCores: cores, MemoryBytes: mem,
		HeartbeatTime: timestamppb.New(now), StartedTime: timestamppb.New(a.started),
		HeartbeatIntervalMs: uint32(a.cfg.Interval.Milliseconds()),
	}
	if a.cfg.Handlers != nil {
		for _, h := range a.cfg.Handlers() {
			ann.Handlers = append(ann.Handlers, &sundialv1.ServedHandler{Team: h.Team, Name: h.Name, Pool: h.Pool})
		}
	}
	val, err := proto.Marshal(ann)
	if err != nil {
		a.cfg.Logger.Error("announcement not encoded", "err", err)
		return
	}
	cl.Produce(ctx, &kgo.Record{Key: []byte(a.cfg.ID), Value: val, Headers: topics.ProtobufHeaders(ann)}, func(_ *kgo.Record, err error) {
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, kgo.ErrClientClosed) {
			a.cfg.Logger.Warn("announcement not written", "err", err)
		}
	})
}

// tombstone says the executor left, so readers drop it at once rather than
// after the expiry bound.
//
// Heartbeats still buffered when Stop cancelled the loop fail with their
// context, and the producer fails every record buffered behind them in the
// partition with the same error: a tombstone failed so, while its own
// context lives, is produced again (the canceled heartbeats are gone).
func (a *Announcer) tombstone(ctx context.Context, cl *kgo.Client) {
	ctx, cancel := context.WithTimeout(ctx, tombstoneTimeout)
	defer cancel()
	for {
		err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(a.cfg.ID)}).FirstErr()
		if err == nil {
			return
		}
		if !errors.Is(err, context.Canceled) || ctx.Err() != nil {
			a.cfg.Logger.Warn("tombstone not written; readers expire the executor instead", "err", err)
			return
		}
	}
}
