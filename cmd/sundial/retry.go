package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/operator"
	"github.com/sundialhq/sundial/store/cassandra"
)

func runsRetryCommand() *cli.Command {
	return &cli.Command{
		Name:      "retry",
		Usage:     "run a failed, timed-out or cancelled run again now, as a new attempt, with its job's current definition",
		ArgsUsage: "RUN_ID",
		Description: `Reads the run's attempts from the history; when its last attempt failed,
timed out (or went dead) or was cancelled, enqueues the next attempt, due now,
built from the job's definition in force, as sundial dlq replay does: fix the
job, apply it, then retry. The run id (the downstream's idempotency key) and
due time stay; the earlier attempts stay in sundial runs get; the new attempt
has the job's whole retry budget. A run in any other state (scheduled,
running, suspended, succeeded, skipped), or one whose job is gone, is an
error that names why. Through the control-plane API (RetryRun) when --api-url
is set, else straight to Cassandra, Kafka and Redis.`,
		Flags: slices.Concat(kafkaFlags(), cassandraStoreFlags(), redisFlags(), apiFlags(), []cli.Flag{
			redisPrefixFlag(),
			timeoutFlag(time.Minute),
		}),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			runID, err := oneArg(cmd, "run id")
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, cmd.Duration("timeout"))
			defer cancel()
			report := func(res operator.RetryResult, err error) error {
				if errors.Is(err, operator.ErrNotRetryable) || errors.Is(err, operator.ErrNotFound) {
					return fmt.Errorf("cannot retry: %w", err)
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.Root().Writer, "%s\tretry enqueued as attempt %d (job %s)\n", runID, res.Attempt, res.JobID)
				return nil
			}
			if ops, ok, err := apiOperations(cmd); ok || err != nil {
				if err != nil {
					return err
				}
				return report(ops.retry(ctx, runID))
			}
			return withRunBackends(ctx, cmd, func(st *cassandra.Store, cfg operator.Config) error {
				trail, err := cliAudit(st)
				if err != nil {
					return err
				}
				cfg.Jobs, cfg.History, cfg.Audit = st, st, trail
				return report(operationsDirect{operator.New(cfg)}.retry(ctx, runID))
			})
		},
	}
}
