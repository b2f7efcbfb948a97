package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/assemble"
	"github.com/sundialhq/sundial/enqueue"
	"github.com/sundialhq/sundial/history"
	"github.com/sundialhq/sundial/internal/lifecycle"
	"github.com/sundialhq/sundial/internal/telemetry"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/leasing"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner"
	"github.com/sundialhq/sundial/runner/breaker"
	"github.com/sundialhq/sundial/runner/target"
	"github.com/sundialhq/sundial/store/cassandra"
)

// openEnqueuer opens the Cassandra store and an Enqueuer over it, for a
// one-shot command (no telemetry). close releases both.
func openEnqueuer(ctx context.Context, cmd *cli.Command, names topics.Names, logger *slog.Logger) (*enqueue.Enqueuer, *cassandra.Store, func(), error) {
	b, err := openEnqueueBackends(ctx, cmd, names, logger, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	return b.enq, b.store, b.close, nil
}

// enqueueBackends are the Cassandra store, the Kafka client that produces
// wake-ups, and the Enqueuer over both.
type enqueueBackends struct {
	store *cassandra.Store
	kafka *kgo.Client
	enq   *enqueue.Enqueuer
}

func (b *enqueueBackends) close() {
	b.kafka.Close()
	_ = b.store.Close()
}

// openEnqueuer is openEnqueuer for a long-running process: the store's
// statements (Cassandra observer), the wake-up client (Kafka client
// "enqueue") and the Enqueuer are measured on the process's registry, and
// the readiness checks "cassandra" and "kafka" are registered.
func (p *process) openEnqueuer(ctx context.Context, cmd *cli.Command, names topics.Names) (*enqueueBackends, error) {
	b, err := openEnqueueBackends(ctx, cmd, names, p.logger, p)
	if err != nil {
		return nil, err
	}
	err = errors.Join(
		p.check("cassandra", b.store.Ping),
		p.check("kafka", telemetry.KafkaCheck(b.kafka)),
	)
	if err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

// openEnqueueBackends opens the store and the Enqueuer, instrumented on p's
// registry when p is not nil.
func openEnqueueBackends(ctx context.Context, cmd *cli.Command, names topics.Names, logger *slog.Logger, p *process) (*enqueueBackends, error) {
	cc, err := cassandraConfig(cmd)
	if err != nil {
		return nil, err
	}
	kopts, err := kafkaOptions(cmd)
	if err != nil {
		return nil, err
	}
	kopts = withKafka(kopts, kgo.RecordPartitioner(enqueue.Partitioner(names, nil)))
	var reg prometheus.Registerer
	if p != nil {
		if err := p.instrumentCassandra(&cc); err != nil {
			return nil, err
		}
		kopts = append(kopts, p.kafkaMetrics("enqueue"))
		reg = p.reg
	}
	st, err := cassandra.Open(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("cassandra: %w", err)
	}
	cluster, err := st.GetClusterConfig(ctx)
	if err != nil {
		_ = st.Close()
		return nil, fmt.Errorf("cassandra: %w", err)
	}
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		_ = st.Close()
		return nil, fmt.Errorf("kafka: %w", err)
	}
	b := &enqueueBackends{store: st, kafka: cl}
	b.enq, err = enqueue.New(enqueue.Config{Store: st, Client: cl, Topics: names, Shards: cluster.Shards, Registerer: reg, Logger: logger})
	if err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

func runnerCommand() *cli.Command {
	return &cli.Command{
		Name:  "runner",
		Usage: "consume runs from sundial.runs.* and execute them",
		Description: `Run several side by side: they share the runs topics through the consumer group
--group-id, take a Redis lease per run (dedupe mark, concurrency limit,
fencing token), execute its target (HTTP, Kafka, a registered handler:
this binary registers "noop", or with --exec-allow a command allowed by
name) for the job's owner team, within the team's egress policy
(--egress-allow, --kafka-target-allow, --exec-allow), write retries and deferrals as due entries in
Cassandra, dead runs to sundial.dlq, and every state change to sundial.events.
Run history for 'sundial runs list' is stored by 'sundial history'; with
--history this process stores it too (a small installation). With --metrics-addr it serves /metrics,
/healthz, and /readyz, ready while Kafka, Redis and Cassandra answer.
Several --redis-addr addresses (or --redis-cluster) use a Redis Cluster: every
Lua script of a job touches keys of one hash tag, so of one slot.

Example, against the local stack:
  source <(deploy/local/stack.sh env) && sundial runner --concurrency 64 --metrics-addr :9465`,
		Flags: append(append(append(append(append(kafkaFlags(), cassandraStoreFlags()...), redisFlags()...), processFlags()...),
			&cli.StringFlag{Name: "redis-key-prefix", Usage: "put in front of every Redis key and channel of the runner (leases, dedupe marks, replace signals), to share one Redis between installations", Sources: envVar("redis-key-prefix")},
			&cli.StringFlag{Name: "group-id", Usage: "consumer group of the runners (default <topic prefix>" + runner.DefaultGroup + ")", Sources: envVar("group-id")},
			&cli.StringFlag{Name: "runner-id", Usage: "name of this runner in events and its leases, the same across its restarts (default: host name and process id); a runner restarted under its name takes over at once the runs it was executing, instead of after --lease-ttl, so two live runners must never share one", Sources: envVar("runner-id")},
			&cli.IntFlag{Name: "concurrency", Value: runner.DefaultConcurrency, Usage: "workers: runs executing at once (HTTP targets mostly wait, so this is well above the core count)", Sources: envVar("concurrency")},
			&cli.IntFlag{Name: "max-in-flight", Usage: "runs holding a lease at once: executing, plus succeeded ones whose event and dedupe mark are being written (0: twice --concurrency)", Sources: envVar("max-in-flight")},
			&cli.IntFlag{Name: "redis-pool-size", Usage: "most connections to Redis (0: --concurrency)", Sources: envVar("redis-pool-size")},
			&cli.IntFlag{Name: "http-idle-conns-per-host", Usage: "idle HTTP connections kept per downstream host for reuse (0: --concurrency)", Sources: envVar("http-idle-conns-per-host")},
			&cli.DurationFlag{Name: "group-session-timeout", Value: runner.DefaultSessionTimeout, Usage: "how long the consumer group waits for a silent runner before moving its partitions (and its unfinished runs) to the others", Sources: envVar("group-session-timeout")},
			&cli.DurationFlag{Name: "group-heartbeat-interval", Value: runner.DefaultHeartbeatInterval, Usage: "how often the runner tells the group it is alive; below --group-session-timeout", Sources: envVar("group-heartbeat-interval")},
			&cli.StringFlag{Name: "group-instance-id", Usage: "static group membership: a unique, stable id per runner (e.g. the pod name); a restart within --group-session-timeout keeps its partitions without a rebalance, a stop does not leave the group (default: dynamic membership)", Sources: envVar("group-instance-id")},
			&cli.IntFlag{Name: "queue-capacity", Usage: "fetched runs waiting per priority; a small queue pauses fetching often and starves the workers under a backlog (0: twice --concurrency, at least 1024)", Sources: envVar("queue-capacity")},
			&cli.IntFlag{Name: "max-pending-per-partition", Value: runner.DefaultMaxPendingPerPartition, Usage: "offsets tracked behind an unfinished run before its partition is paused", Sources: envVar("max-pending-per-partition")},
			&cli.DurationFlag{Name: "run-timeout", Value: runner.DefaultRunTimeout, Usage: "per-attempt timeout of runs that carry none", Sources: envVar("run-timeout")},
			&cli.DurationFlag{Name: "lease-ttl", Value: leasing.DefaultTTL, Usage: "lease time to live; a dead runner's runs restart after at most this", Sources: envVar("lease-ttl")},
			&cli.DurationFlag{Name: "commit-interval", Value: runner.DefaultCommitInterval, Usage: "how often finished offsets are committed", Sources: envVar("commit-interval")},
			&cli.UintFlag{Name: "breaker-failures", Value: breaker.DefaultFailures, Usage: "consecutive failures of a downstream host that open its circuit breaker", Sources: envVar("breaker-failures")},
			&cli.DurationFlag{Name: "breaker-open-timeout", Value: breaker.DefaultOpenTimeout, Usage: "how long an open breaker defers runs before probing", Sources: envVar("breaker-open-timeout")},
			&cli.DurationFlag{Name: "started-delay", Value: runner.DefaultStartedDelay, Usage: "how long an attempt's STARTED event is held back; an attempt that ends sooner carries its start in its outcome and has no STARTED event (negative: send it at once)", Sources: envVar("started-delay")},
			&cli.DurationFlag{Name: "shutdown-timeout", Value: runner.DefaultShutdownTimeout, Usage: "on stop, how long executing runs may finish before they are cancelled", Sources: envVar("shutdown-timeout")},
			&cli.BoolFlag{Name: "history", Usage: "also store run events as history in Cassandra, in this process (for a small installation; otherwise run 'sundial history')", Sources: envVar("history")},
			&cli.StringFlag{Name: "secrets-dir", Usage: "directory of the teams' secrets: team T's secret NAME, used as ${secret:NAME} in its HTTP targets, is the file DIR/T/NAME (default: none, a job with a secret reference fails)", Sources: envVar("secrets-dir")},
			&cli.IntFlag{Name: "exec-max-output", Value: target.DefaultExecMaxOutput, Usage: "bytes of an exec target's output captured; the run's record keeps its last lines", Sources: envVar("exec-max-output")},
		),
			append(poolFlags(), egressFlags()...)...),
		Action: runRunner,
	}
}

// noopHandler succeeds at once; the load generator's jobs use it.
func noopHandler(context.Context, *sundialv1.Run) error { return nil }

func runRunner(ctx context.Context, cmd *cli.Command) error {
	// The store is opened by openEnqueuer, from the same flags.
	kopts, _, p, bad := serverFlags(ctx, cmd, "runner")
	names := topics.Names{Prefix: cmd.String("topic-prefix")}
	concurrency := cmd.Int("concurrency")
	if concurrency <= 0 {
		bad = append(bad, fmt.Errorf("--concurrency: %d is not positive", concurrency))
	}
	poolSize := cmp.Or(cmd.Int("redis-pool-size"), concurrency)
	idleConns := cmp.Or(cmd.Int("http-idle-conns-per-host"), concurrency)
	for _, f := range []struct {
		name string
		v    int
	}{{"redis-pool-size", poolSize}, {"http-idle-conns-per-host", idleConns}} {
		if f.v < 0 {
			bad = append(bad, fmt.Errorf("--%s: %d is negative", f.name, f.v))
		}
	}
	egressCfg, exe, err := runnerEgress(cmd)
	if err != nil {
		bad = append(bad, err)
	}
	secrets, err := secretsDir(cmd.String("secrets-dir"))
	if err != nil {
		bad = append(bad, err)
	}
	cfg := runner.Config{
		TracerProvider:         p.tracerProvider(),
		EventEncoding:          p.encoding,
		ID:                     cmd.String("runner-id"),
		Kafka:                  kopts,
		SessionTimeout:         cmd.Duration("group-session-timeout"),
		HeartbeatInterval:      cmd.Duration("group-heartbeat-interval"),
		InstanceID:             cmd.String("group-instance-id"),
		HTTPTransport:          target.PooledTransport(max(idleConns, 1)),
		Egress:                 egressCfg,
		MaxInFlight:            cmd.Int("max-in-flight"),
		Topics:                 names,
		Group:                  cmd.String("group-id"),
		Handlers:               map[string]target.Handler{"noop": target.HandlerFunc(noopHandler)},
		Exec:                   exe,
		Secrets:                secrets,
		Breakers:               breaker.Config{Failures: uint32(cmd.Uint("breaker-failures")), OpenTimeout: cmd.Duration("breaker-open-timeout")},
		Concurrency:            concurrency,
		QueueCapacity:          cmd.Int("queue-capacity"),
		MaxPendingPerPartition: cmd.Int("max-pending-per-partition"),
		CommitInterval:         cmd.Duration("commit-interval"),
		RunTimeout:             cmd.Duration("run-timeout"),
		ShutdownTimeout:        cmd.Duration("shutdown-timeout"),
		StartedDelay:           cmd.Duration("started-delay"),
	}
	if err := applyPoolFlags(cmd, &cfg); err != nil {
		bad = append(bad, err)
	}
	backends := assemble.RunnerBackends{RedisKeyPrefix: cmd.String("redis-key-prefix"), LeaseTTL: cmd.Duration("lease-ttl")}
	// Check the flags before connecting to anything.
	if err := assemble.CheckRunner(cfg, backends); err != nil {
		bad = append(bad, err)
	}
	rdb, err := redisClient(cmd, max(poolSize, 1))
	if err != nil {
		bad = append(bad, err)
	}
	if err := errors.Join(bad...); err != nil {
		if rdb != nil {
			_ = rdb.Close()
		}
		return err
	}
	defer func() { _ = rdb.Close() }()
	cfg.Registerer, cfg.Logger = p.reg, p.logger
	cfg.Egress.Own = ownAddresses(ctx, cmd, p.logger)
	// One kprom instance describes one client: the runner's producer and
	// its group consumer get one each.
	cfg.ProducerKafka = []kgo.Opt{p.kafkaMetrics("runner-producer")}
	cfg.ConsumerKafka = []kgo.Opt{p.kafkaMetrics("runner-consumer")}
	if err := telemetry.InstrumentRedis(rdb, p.reg, "leases"); err != nil {
		return err
	}
	rdb.AddHook(p.work.RedisHook())

	if err := checkKafka(ctx, kopts); err != nil {
		return err
	}
	openCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	b, err := p.openEnqueuer(openCtx, cmd, names)
	if err != nil {
		return err
	}
	defer b.close()
	if err := checkRedis(ctx, rdb); err != nil {
		return err
	}
	if err := p.check("redis", telemetry.RedisCheck(rdb)); err != nil {
		return err
	}
	backends.Redis, backends.Enqueuer, backends.Checkpoints, backends.Quotas = rdb, b.enq, b.store, b.store
	r, err := assemble.Runner(openCtx, cfg, backends)
	if err != nil {
		return err
	}
	logEgress(p.logger, r.Egress())
	components := []lifecycle.Component{r}
	if cmd.Bool("history") {
		w, err := history.New(historyConfig(p, b.store, kopts, names, "history"))
		if err != nil {
			return err
		}
		components = append(components, w)
	}
	return p.run(ctx, components...)
}

// secretsDir returns the secrets of --secrets-dir, nil when it is empty.
// A nil *SecretsDir must not become a non-nil interface.
func secretsDir(dir string) (target.Secrets, error) {
	if dir == "" {
		return nil, nil
	}
	d, err := target.NewSecretsDir(dir)
	if err != nil {
		return nil, fmt.Errorf("--secrets-dir: %w", err)
	}
	return d, nil
}
