package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/audit"
	"github.com/sundialhq/sundial/dagengine"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/jobspec"
	"github.com/sundialhq/sundial/registry"
	"github.com/sundialhq/sundial/trigger"
)

func registryCommand() *cli.Command {
	return &cli.Command{
		Name:  "registry",
		Usage: "consume job definitions (sundial.jobs) and triggers (sundial.triggers) into the schedule",
		Description: `Validates every definition produced to sundial.jobs, stores accepted ones in
Cassandra with their first due entry, and answers each on sundial.jobs.status
(accepted, or rejected naming the field and the reason). Triggers on
sundial.triggers start a job now, or a run of the DAG they name (the DAG
engines carry it on); a repeated idempotency key runs once.
Several registries may run side by side: they share the partitions through
their consumer groups.

Example, against the local stack:
  source <(deploy/local/stack.sh env) && sundial registry --metrics-addr :9463`,
		Flags: append(append(append(kafkaFlags(), cassandraStoreFlags()...), processFlags()...),
			&cli.StringFlag{Name: "group-id", Usage: "consumer group of the registries on sundial.jobs (default <topic prefix>" + registry.DefaultGroup + ")", Sources: envVar("group-id")},
			&cli.StringFlag{Name: "trigger-group-id", Usage: "consumer group on sundial.triggers (default <topic prefix>" + trigger.DefaultGroup + ")", Sources: envVar("trigger-group-id")},
			&cli.IntFlag{Name: "concurrency", Value: registry.DefaultConcurrency, Usage: "definitions processed at once (records of one job stay in order)", Sources: envVar("concurrency")},
			&cli.IntFlag{Name: "max-payload-bytes", Value: jobspec.DefaultMaxPayloadBytes, Usage: "largest payload a definition or trigger may carry", Sources: envVar("max-payload-bytes")},
			&cli.BoolFlag{Name: "jobs-shared-topic", Usage: "also read definitions from the shared sundial.jobs, which lets whoever may write it change any team's job (logged as a warning; for the move to team topics only); default: ownership enforced, team topics sundial.jobs.<team> only", Sources: envVar("jobs-shared-topic")},
			&cli.DurationFlag{Name: "audit-retention", Value: audit.DefaultRetention, Usage: "how long the audit trail keeps a definition change", Sources: envVar("audit-retention")},
		),
		Action: runRegistry,
	}
}

func runRegistry(ctx context.Context, cmd *cli.Command) error {
	// The store is opened by openEnqueuer, from the same flags.
	kopts, _, p, bad := serverFlags(ctx, cmd, "registry")
	if err := errors.Join(bad...); err != nil {
		return err
	}
	names := topics.Names{Prefix: cmd.String("topic-prefix")}
	limits := jobspec.Limits{MaxPayloadBytes: cmd.Int("max-payload-bytes")}

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
	trail, err := audit.New(audit.Config{Store: b.store, Producer: b.kafka, Topic: names.Audit(), Retention: cmd.Duration("audit-retention")})
	if err != nil {
		return err
	}
	reg, err := registry.New(registry.Config{
		Kafka: withKafka(kopts, p.kafkaMetrics("registry")), Topics: names, Group: cmd.String("group-id"), Store: b.store, Waker: b.enq, Limits: limits,
		SharedTopic: cmd.Bool("jobs-shared-topic"), Audit: trail, TracerProvider: p.tracerProvider(), StatusEncoding: p.encoding,
		Quotas:      b.store,
		Concurrency: cmd.Int("concurrency"),
		Registerer:  p.reg, Logger: p.logger,
	})
	if err != nil {
		return err
	}
	// A trigger naming a DAG starts the DAG's run through the DAG engine's
	// library; the running engines carry the run on.
	cluster, err := b.store.GetClusterConfig(openCtx)
	if err != nil {
		return fmt.Errorf("cassandra: %w", err)
	}
	dags, err := dagengine.NewRuns(dagengine.RunsConfig{Store: b.store, Enqueuer: b.enq, Producer: b.kafka, Topics: names,
		Shards: cluster.Shards, Registerer: p.reg, Logger: p.named("dagengine"), EventEncoding: p.encoding})
	if err != nil {
		return err
	}
	trg, err := trigger.New(trigger.Config{
		Kafka: withKafka(kopts, p.kafkaMetrics("trigger")), Topics: names, Group: cmd.String("trigger-group-id"), Store: b.store, Enqueuer: b.enq, Dags: dags,
		MaxPayloadBytes: limits.MaxPayloadBytes, TracerProvider: p.tracerProvider(), EventEncoding: p.encoding,
		Registerer: p.reg, Logger: p.named("trigger"),
	})
	if err != nil {
		return err
	}
	return p.run(ctx, reg, trg)
}
