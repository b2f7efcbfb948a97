package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/history"
	"github.com/sundialhq/sundial/internal/telemetry"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/store/cassandra"
)

func historyCommand() *cli.Command {
	return &cli.Command{
		Name:  "history",
		Usage: "store run events from sundial.events as run history, for 'sundial runs list'",
		Description: `Consumes sundial.events in the consumer group --group-id, folds the events
of each poll into one row per attempt (its latest state) and writes them to
Cassandra in batches. Runners never wait for it: when it falls behind, only
'sundial runs list' and the job view's last and next run lag, which
sundial_history_consumer_lag_seconds measures. Run one or a few (they share
the partitions of sundial.events). With --metrics-addr it serves /metrics,
/healthz and /readyz, ready while Kafka and Cassandra answer.

Example, against the local stack:
  source <(deploy/local/stack.sh env) && sundial history --metrics-addr :9467`,
		Flags: append(append(append(kafkaFlags(), cassandraStoreFlags()...), processFlags()...),
			&cli.StringFlag{Name: "group-id", Usage: "consumer group of the history writers (default <topic prefix>" + history.DefaultGroup + ")", Sources: envVar("group-id")},
			&cli.IntFlag{Name: "max-poll-records", Value: history.DefaultMaxPollRecords, Usage: "most events read, coalesced and written together", Sources: envVar("max-poll-records")},
		),
		Action: runHistory,
	}
}

func runHistory(ctx context.Context, cmd *cli.Command) error {
	kopts, cc, p, bad := serverFlags(ctx, cmd, "history")
	if n := cmd.Int("max-poll-records"); n <= 0 {
		bad = append(bad, fmt.Errorf("--max-poll-records: %d is not positive", n))
	}
	if err := errors.Join(bad...); err != nil {
		return err
	}
	if err := p.instrumentCassandra(&cc); err != nil {
		return err
	}
	if err := checkKafka(ctx, kopts); err != nil {
		return err
	}
	openCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	st, err := cassandra.Open(openCtx, cc)
	if err != nil {
		return fmt.Errorf("cassandra: %w", err)
	}
	defer func() { _ = st.Close() }()
	cfg := historyConfig(p, st, kopts, topics.Names{Prefix: cmd.String("topic-prefix")}, "history")
	cfg.Group, cfg.MaxPollRecords = cmd.String("group-id"), cmd.Int("max-poll-records")
	w, err := history.New(cfg)
	if err != nil {
		return err
	}
	// The writer's own client is inside it; a second one answers the
	// readiness check.
	probe, err := kgo.NewClient(kopts...)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	defer probe.Close()
	if err := errors.Join(p.check("cassandra", st.Ping), p.check("kafka", telemetry.KafkaCheck(probe))); err != nil {
		return err
	}
	return p.run(ctx, w)
}

// historyConfig is the history writer's configuration in a process (`sundial
// history`, or `sundial runner --history`): measured on the process's
// registry, its Kafka client's metrics named client.
func historyConfig(p *process, st *cassandra.Store, kopts []kgo.Opt, names topics.Names, client string) history.Config {
	return history.Config{
		Kafka:      withKafka(kopts, p.kafkaMetrics(client)),
		Topics:     names,
		History:    st,
		Registerer: p.reg,
		Logger:     p.named("history"),
	}
}
