package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/discovery"
	"github.com/sundialhq/sundial/dispatcher"
	"github.com/sundialhq/sundial/internal/telemetry"
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
(sundial migrate fixes it). /readyz reports ready while the dispatcher owns at
least one shard.

Example, against the local stack:
  source <(deploy/local/stack.sh env) && sundial dispatcher --metrics-addr :9464`,
		Flags: append(append(append(kafkaFlags(), cassandraStoreFlags()...), processFlags()...),
			&cli.StringFlag{Name: "group-id", Usage: "consumer group the dispatchers share the shards in (default <topic prefix>" + dispatcher.DefaultGroupID + ")", Sources: envVar("group-id")},
			&cli.StringFlag{Name: "instance-id", Usage: "name of this dispatcher in shard claims (default: host name and process id)", Sources: envVar("instance-id")},
			&cli.DurationFlag{Name: "lookahead", Value: dispatcher.DefaultLookahead, Usage: "read a minute bucket this long before it starts", Sources: envVar("lookahead")},
			&cli.DurationFlag{Name: "prepare-ahead", Value: dispatcher.DefaultPrepareAhead, Usage: "start a firing (job read, run built) this long before its due time; the run is produced at the due time", Sources: envVar("prepare-ahead")},
			&cli.DurationFlag{Name: "job-feed-max-lag", Value: dispatcher.DefaultJobFeedMaxLag, Usage: "use job definitions from memory and entries only while the jobs feed is at most this far behind; a change answered less than this before an occurrence may miss it", Sources: envVar("job-feed-max-lag")},
			&cli.DurationFlag{Name: "job-feed-replay", Value: dispatcher.DefaultJobFeedReplay, Usage: "at start, read the registry's answers of this long ago onward, so the entries' job snapshots checked since are trusted at once instead of each firing reading its job", Sources: envVar("job-feed-replay")},
			&cli.DurationFlag{Name: "catch-up-horizon", Value: dispatcher.DefaultCatchUpHorizon, Usage: "read at most this far back from a shard's watermark after an outage", Sources: envVar("catch-up-horizon")},
			&cli.DurationFlag{Name: "misfire-threshold", Value: dispatcher.DefaultMisfireThreshold, Usage: "an entry first seen this long after its due time was missed (misfire policy applies)", Sources: envVar("misfire-threshold")},
			&cli.DurationFlag{Name: "watermark-interval", Value: dispatcher.DefaultWatermarkInterval, Usage: "how often each shard's watermark and wake-up offsets are saved", Sources: envVar("watermark-interval")},
			&cli.DurationFlag{Name: "session-timeout", Value: dispatcher.DefaultSessionTimeout, Usage: "consumer group session timeout: how soon a dead dispatcher's shards move", Sources: envVar("session-timeout")},
			&cli.StringFlag{Name: "group-instance-id", Usage: "static group membership: a unique, stable id per dispatcher (e.g. the pod name); a crashed dispatcher restarted within --session-timeout gets its shards back without a rebalance, a stop still leaves the group (default: dynamic membership)", Sources: envVar("group-instance-id")},
			&cli.IntFlag{Name: "max-inflight", Value: dispatcher.DefaultMaxInflight, Usage: "firings of one shard in progress at once", Sources: envVar("max-inflight")},
			&cli.IntFlag{Name: "max-firing", Value: dispatcher.DefaultMaxFiring, Usage: "firings in progress at once across the dispatcher's shards (bounds memory under overload)", Sources: envVar("max-firing")},
			&cli.IntFlag{Name: "max-held", Value: dispatcher.DefaultMaxHeld, Usage: "due entries held in memory across the dispatcher's shards (bounds memory under overload)", Sources: envVar("max-held")},
			&cli.StringSliceFlag{Name: "executor-pools", Value: []string{discovery.DefaultPool}, Usage: "pools whose live executors sundial_executors_live reports, 0 before any executor of theirs is seen (the dispatcher reads sundial.executors, where routing will need it)", Sources: envVar("executor-pools")},
		),
		Action: runDispatcher,
	}
}

func runDispatcher(ctx context.Context, cmd *cli.Command) error {
	kopts, storeCfg, p, bad := serverFlags(ctx, cmd, "dispatcher")
	if len(bad) > 0 {
		return errors.Join(bad...)
	}
	cfg := dispatcher.Config{
		TracerProvider:    p.tracerProvider(),
		EventEncoding:     p.encoding,
		Kafka:             kopts,
		GroupClientOpts:   []kgo.Opt{p.kafkaMetrics("dispatcher")},
		Topics:            topics.Names{Prefix: cmd.String("topic-prefix")},
		GroupID:           cmd.String("group-id"),
		InstanceID:        cmd.String("instance-id"),
		Lookahead:         cmd.Duration("lookahead"),
		PrepareAhead:      cmd.Duration("prepare-ahead"),
		JobFeedMaxLag:     cmd.Duration("job-feed-max-lag"),
		JobFeedReplay:     cmd.Duration("job-feed-replay"),
		CatchUpHorizon:    cmd.Duration("catch-up-horizon"),
		MisfireThreshold:  cmd.Duration("misfire-threshold"),
		WatermarkInterval: cmd.Duration("watermark-interval"),
		SessionTimeout:    cmd.Duration("session-timeout"),
		GroupInstanceID:   cmd.String("group-instance-id"),
		MaxInflight:       cmd.Int("max-inflight"),
		MaxFiring:         cmd.Int("max-firing"),
		MaxHeld:           cmd.Int("max-held"),
		Logger:            p.logger,
		Registerer:        p.reg,
	}
	// Check the flags before connecting to anything; the store is opened
	// only when they are right.
	check := cfg
	check.Store = (*cassandra.Store)(nil)
	if err := check.Validate(); err != nil {
		return err
	}

	if err := checkKafka(ctx, kopts); err != nil {
		return err
	}
	if err := p.instrumentCassandra(&storeCfg); err != nil {
		return err
	}
	openCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	st, err := cassandra.Open(openCtx, storeCfg)
	if err != nil {
		return fmt.Errorf("cassandra: %w", err)
	}
	defer func() { _ = st.Close() }()
	cfg.Store = st
	d, err := dispatcher.New(cfg)
	if err != nil {
		return err
	}
	dir, err := discovery.NewDirectory(discovery.DirectoryConfig{
		Kafka: kopts, Topics: cfg.Topics, Pools: cmd.StringSlice("executor-pools"), Registerer: p.reg, Logger: p.logger,
	})
	if err != nil {
		return err
	}
	if err := p.check("shards", telemetry.ShardsCheck(d.Owned)); err != nil {
		return err
	}
	if err := p.check("cassandra", func(ctx context.Context) error {
		if _, err := st.GetClusterConfig(ctx); err != nil {
			return fmt.Errorf("cassandra: %w", err)
		}
		return nil
	}); err != nil {
		return err
	}
	return p.run(ctx, d, dir)
}
