package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/dispatcher"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/store/cassandra"
)

func dispatcherCommand() *cli.Command {
	return &cli.Command{
		Name:  "dispatcher",
		Usage: "own a share of the shards and fire their due entries into sundial.runs.*",
		Description: `Run several side by side: they share the shards through the Kafka consumer
group --group-id over sundial.shards, claim each shard in Cassandra (fencing
epoch), read each shard's minute buckets --lookahead before they fall due, and
fire every entry at its due time. The shard count comes from the cluster
(sundial migrate fixes it).

Example, against the local stack:
  source <(deploy/local/stack.sh env) && sundial dispatcher --metrics-addr :9464`,
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "kafka-brokers", Usage: "Kafka seed brokers, host:port", Sources: envVar("kafka-brokers")},
			&cli.StringSliceFlag{Name: "cassandra-hosts", Usage: "Cassandra contact points, host or host:port", Sources: envVar("cassandra-hosts")},
			&cli.StringFlag{Name: "keyspace", Value: cassandra.DefaultKeyspace, Usage: "Cassandra keyspace of the schedule store", Sources: envVar("keyspace")},
			&cli.StringFlag{Name: "cassandra-datacenter", Usage: "local data centre, preferred by the driver", Sources: envVar("cassandra-datacenter")},
			&cli.StringFlag{Name: "topic-prefix", Usage: "prefix put in front of every topic name", Sources: envVar("topic-prefix")},
			&cli.StringFlag{Name: "group-id", Value: dispatcher.DefaultGroupID, Usage: "consumer group the dispatchers share the shards in", Sources: envVar("group-id")},
			&cli.StringFlag{Name: "instance-id", Usage: "name of this dispatcher in shard claims (default: host name and process id)", Sources: envVar("instance-id")},
			&cli.DurationFlag{Name: "lookahead", Value: dispatcher.DefaultLookahead, Usage: "read a minute bucket this long before it starts", Sources: envVar("lookahead")},
			&cli.DurationFlag{Name: "catch-up-horizon", Value: dispatcher.DefaultCatchUpHorizon, Usage: "read at most this far back from a shard's watermark after an outage", Sources: envVar("catch-up-horizon")},
			&cli.DurationFlag{Name: "misfire-threshold", Value: dispatcher.DefaultMisfireThreshold, Usage: "an entry first seen this long after its due time was missed (misfire policy applies)", Sources: envVar("misfire-threshold")},
			&cli.DurationFlag{Name: "watermark-interval", Value: dispatcher.DefaultWatermarkInterval, Usage: "how often each shard's watermark and wake-up offsets are saved", Sources: envVar("watermark-interval")},
			&cli.DurationFlag{Name: "session-timeout", Value: dispatcher.DefaultSessionTimeout, Usage: "consumer group session timeout: how soon a dead dispatcher's shards move", Sources: envVar("session-timeout")},
			&cli.StringFlag{Name: "metrics-addr", Usage: "serve Prometheus metrics on this address (host:port) at /metrics; empty: do not serve", Sources: envVar("metrics-addr")},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error", Sources: envVar("log-level")},
		},
		Action: runDispatcher,
	}
}

func runDispatcher(ctx context.Context, cmd *cli.Command) error {
	var bad []error
	if len(cmd.StringSlice("kafka-brokers")) == 0 {
		bad = append(bad, errors.New("--kafka-brokers: required (or SUNDIAL_KAFKA_BROKERS)"))
	}
	if len(cmd.StringSlice("cassandra-hosts")) == 0 {
		bad = append(bad, errors.New("--cassandra-hosts: required (or SUNDIAL_CASSANDRA_HOSTS)"))
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cmd.String("log-level"))); err != nil {
		bad = append(bad, fmt.Errorf("--log-level %q: want debug, info, warn or error", cmd.String("log-level")))
	}
	storeCfg := cassandra.Config{
		Hosts:      cmd.StringSlice("cassandra-hosts"),
		Keyspace:   cmd.String("keyspace"),
		Datacenter: cmd.String("cassandra-datacenter"),
	}
	if len(storeCfg.Hosts) > 0 {
		if err := storeCfg.Validate(); err != nil {
			bad = append(bad, err)
		}
	}
	logger := slog.New(slog.NewTextHandler(cmd.Root().ErrWriter, &slog.HandlerOptions{Level: level}))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg := dispatcher.Config{
		Brokers:           cmd.StringSlice("kafka-brokers"),
		Topics:            topics.Names{Prefix: cmd.String("topic-prefix")},
		GroupID:           cmd.String("group-id"),
		InstanceID:        cmd.String("instance-id"),
		Lookahead:         cmd.Duration("lookahead"),
		CatchUpHorizon:    cmd.Duration("catch-up-horizon"),
		MisfireThreshold:  cmd.Duration("misfire-threshold"),
		WatermarkInterval: cmd.Duration("watermark-interval"),
		SessionTimeout:    cmd.Duration("session-timeout"),
		Logger:            logger,
		Registerer:        reg,
	}
	// Check the flags before connecting to anything; the store is opened
	// only when they are right.
	check := cfg
	check.Store = (*cassandra.Store)(nil)
	if err := check.Validate(); err != nil {
		bad = append(bad, err)
	}
	if err := errors.Join(bad...); err != nil {
		return err
	}

	openCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	st, err := cassandra.Open(openCtx, storeCfg)
	if err != nil {
		return fmt.Errorf("cassandra: %w", err)
	}
	defer st.Close()
	cfg.Store = st
	d, err := dispatcher.New(cfg)
	if err != nil {
		return err
	}
	if addr := cmd.String("metrics-addr"); addr != "" {
		stop, err := serveMetrics(addr, reg, logger)
		if err != nil {
			return err
		}
		defer stop()
	}
	if err := d.Start(openCtx); err != nil {
		return err
	}
	<-ctx.Done()
	logger.Info("stopping: draining owned shards")
	d.Stop()
	return nil
}

// serveMetrics serves reg at /metrics until the returned stop is called.
func serveMetrics(addr string, reg *prometheus.Registry, logger *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics server", "err", err)
		}
	}()
	logger.Info("serving metrics", "addr", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}
