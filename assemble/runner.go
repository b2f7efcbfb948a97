package assemble

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sundialhq/sundial/checkpoint"
	"github.com/sundialhq/sundial/gateway"
	"github.com/sundialhq/sundial/leasing"
	"github.com/sundialhq/sundial/logtail"
	"github.com/sundialhq/sundial/quota"
	"github.com/sundialhq/sundial/runner"
	"github.com/sundialhq/sundial/store"
)

// RunnerBackends are the open clients a runner is built on.
type RunnerBackends struct {
	// Redis holds the leases, the replace signal and the teams' run rates.
	// Required.
	Redis redis.UniversalClient
	// RedisKeyPrefix starts every Redis key of the installation; empty for
	// none.
	RedisKeyPrefix string
	// LeaseTTL is how long a lease lives without a heartbeat; zero for
	// leasing's default.
	LeaseTTL time.Duration
	// Enqueuer makes retries, deferrals and the next attempts durable
	// (enqueue.Enqueuer over the store). Required.
	Enqueuer runner.Enqueuer
	// Checkpoints keeps runs' checkpoints and suspensions; nil when the
	// store has none (the embedded store), and a run that checkpoints then
	// fails with a clear error.
	Checkpoints checkpoint.Store
	// Quotas holds the teams' quotas; nil for none (every team unbounded).
	// With it the runner enforces max_concurrent_runs and
	// max_runs_per_minute, and the quota usage is exported on
	// runner.Config.Registerer.
	Quotas quota.Store
}

// Runner builds a runner from cfg, which carries the plain settings (ids,
// topics, limits, handlers, egress, clock, logger, registerer), and b. The
// backend fields of cfg (Leases, Redis, KeyPrefix, Enqueuer, Checkpoints,
// TeamQuotas) are set here from b and must be left empty. It loads the
// lease scripts, so a Redis that refuses them fails here rather than on
// the first run.
func Runner(ctx context.Context, cfg runner.Config, b RunnerBackends) (*runner.Runner, error) {
	if err := backendFieldsEmpty(cfg); err != nil {
		return nil, err
	}
	leases, err := fill(&cfg, b)
	if err != nil {
		return nil, err
	}
	if err := leases.Load(ctx); err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	if b.Quotas != nil && cfg.Registerer != nil {
		if err := cfg.Registerer.Register(quota.NewCollector(b.Quotas, leases, 0)); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, fmt.Errorf("quota metrics: %w", err)
			}
		}
	}
	return runner.New(cfg)
}

// CheckRunner reports every bad setting of cfg and b's settings
// (LeaseTTL), as Runner would, without a backend: it stands in for the
// clients, which are never used.
func CheckRunner(cfg runner.Config, b RunnerBackends) error {
	if err := backendFieldsEmpty(cfg); err != nil {
		return err
	}
	b.Redis = redis.NewClient(&redis.Options{}) // never dialled
	defer func() { _ = b.Redis.Close() }()
	b.Enqueuer = standIn{}
	var errs []error
	if _, err := fill(&cfg, b); err != nil {
		// Reported, and the rest is checked with the default lease TTL.
		errs = append(errs, err)
		b.LeaseTTL = 0
		if _, err := fill(&cfg, b); err != nil {
			return errors.Join(append(errs, err)...)
		}
	}
	return errors.Join(append(errs, cfg.Validate())...)
}

// fill sets cfg's backend fields from b, the one rule of what a runner is
// made of.
func fill(cfg *runner.Config, b RunnerBackends) (*leasing.Store, error) {
	if b.Redis == nil {
		return nil, errors.New("assemble runner: Redis: required")
	}
	leases, err := leasing.New(leasing.Config{
		Client: b.Redis, TTL: b.LeaseTTL, KeyPrefix: b.RedisKeyPrefix + leasing.DefaultKeyPrefix, Now: cfg.Now,
		// A runner named by its operator (--runner-id) is the same holder
		// when it restarts, and takes over the runs it was executing at
		// once; the default id names the process, so it never matches.
		Holder: url.PathEscape(cfg.ID),
	})
	if err != nil {
		return nil, err
	}
	cfg.Leases = leases
	cfg.Redis = b.Redis
	cfg.KeyPrefix = b.RedisKeyPrefix + runner.DefaultKeyPrefix
	cfg.Enqueuer = b.Enqueuer
	if b.Checkpoints != nil {
		cfg.Checkpoints = b.Checkpoints
	}
	if b.Quotas != nil {
		cfg.TeamQuotas = quota.NewCache(b.Quotas, 0, cfg.Now)
	}
	return leases, nil
}

// backendFieldsEmpty refuses a cfg whose backend fields are set: they come
// from RunnerBackends only, so that no caller builds them its own way.
func backendFieldsEmpty(cfg runner.Config) error {
	var set []string
	if cfg.Leases != nil {
		set = append(set, "Leases")
	}
	if cfg.Redis != nil {
		set = append(set, "Redis")
	}
	if cfg.KeyPrefix != "" {
		set = append(set, "KeyPrefix")
	}
	if cfg.Enqueuer != nil {
		set = append(set, "Enqueuer")
	}
	if cfg.Checkpoints != nil {
		set = append(set, "Checkpoints")
	}
	if cfg.TeamQuotas != nil {
		set = append(set, "TeamQuotas")
	}
	if len(set) > 0 {
		return fmt.Errorf("assemble runner: %v: set from RunnerBackends, leave them empty in runner.Config", set)
	}
	return nil
}

// standIn lets CheckRunner validate before the store is opened.
type standIn struct{}

func (standIn) Enqueue(context.Context, ...store.DueEntry) error {
	return errors.New("assemble: stand-in enqueuer")
}

// Gateway pool and group: a worker gateway's runner announces itself in
// GatewayPool and consumes its directed topic in GatewayGroup, so that
// the gateways of an installation adopt each other's directed topics and
// none of them consumes the runs topics of the stock runners.
const (
	GatewayPool  = "gateway"
	GatewayGroup = "sundial-gateways"
)

// DefaultGatewayConcurrency is a gateway runner's Concurrency unless cfg
// sets one: four times a stock runner's. A gateway's runner worker holds
// an attempt's lease while a team's worker polls, executes and completes
// it, several round trips that use no CPU of the gateway; at the stock
// runner's 256, a burst of runs waited for the gateway's workers rather
// than for the teams' (docs/architecture.md §11). The teams' quotas and
// their workers' slots bound what executes.
const DefaultGatewayConcurrency = 4 * runner.DefaultConcurrency

// Gateway builds the runner of a worker gateway (package gateway): a runner
// as Runner builds it whose handler runs execute on the remote workers of
// broker (runner.Config.Remote), that consumes only its directed topic
// (runner.Config.DirectOnly), in the pool GatewayPool and the group
// GatewayGroup unless cfg names others, with DefaultGatewayConcurrency
// workers unless cfg sets Concurrency. The stock runners route the handler
// runs they cannot execute to it while its workers serve them. Its
// attempts' live tails are bounded by the broker's bounds
// (gateway.Config.LogTail), the ones the broker tells its workers: cfg's
// LogTail must be unset or the same.
func Gateway(ctx context.Context, cfg runner.Config, b RunnerBackends, broker *gateway.Broker) (*runner.Runner, error) {
	if broker == nil {
		return nil, errors.New("assemble gateway: broker: required")
	}
	if cfg.LogTail != (logtail.Bounds{}) && cfg.LogTail.WithDefaults() != broker.LogTail() {
		return nil, fmt.Errorf("assemble gateway: runner LogTail %+v: the broker's bounds are %+v; set gateway.Config.LogTail, which the workers are told, and leave the runner's unset", cfg.LogTail, broker.LogTail())
	}
	cfg.LogTail = broker.LogTail()
	cfg.Remote = broker
	cfg.DirectOnly = true
	if cfg.Pool == "" {
		cfg.Pool = GatewayPool
	}
	if cfg.Group == "" {
		cfg.Group = cfg.Topics.Group(GatewayGroup)
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultGatewayConcurrency
	}
	return Runner(ctx, cfg, b)
}
