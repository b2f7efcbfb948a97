package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/operator"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store/cassandra"
)

// runs suspend and runs resume (operator/suspend.go).

func runsSuspendCommand() *cli.Command {
	return &cli.Command{
		Name:      "suspend",
		Usage:     "suspend a running run after its next checkpoint: its lease is released and it becomes SUSPENDED",
		ArgsUsage: "RUN_ID",
		Description: `Asks Redis whether the run holds a lease; if it does, marks it to suspend.
The runner executing it stops it right after the handler's next checkpoint
and records SUSPENDED; with --wait (the default) the command prints that
event, or the run's terminal event when it ended first. A handler that saves
no checkpoint runs to its end. Resume it with "sundial runs resume". The job
id is taken from the run id (JOB@millis); name it with --job for a DAG
node's run.`,
		Flags: slices.Concat(kafkaFlags(), redisFlags(), []cli.Flag{
			redisPrefixFlag(),
			&cli.StringFlag{Name: "job", Usage: "the run's job id (default: from the run id)", Sources: envVar("job")},
			&cli.BoolFlag{Name: "wait", Value: true, Usage: "wait for SUSPENDED or the run's terminal event", Sources: envVar("wait")},
			timeoutFlag(10 * time.Minute),
		}),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			return signalRun(ctx, cmd, "suspend", "suspend requested", func(ctx context.Context, op *operator.Operator, job, runID string, wait bool) (*sundialv1.RunEvent, error) {
				res, err := op.Suspend(ctx, job, runID, operator.SuspendOptions{Wait: wait})
				return res.Event, err
			})
		},
	}
}

func runsResumeCommand() *cli.Command {
	return &cli.Command{
		Name:      "resume",
		Usage:     "resume a suspended run under the same run id, from its last checkpoint",
		ArgsUsage: "RUN_ID",
		Description: `Reads the suspended run from the store, deletes its suspend marker and
enqueues it as due now, under the same run id and attempt; the handler's
LastCheckpoint returns the checkpoint the run stopped at. A run that is not
suspended (never, or already resumed) is an error.`,
		Flags: slices.Concat(kafkaFlags(), cassandraStoreFlags(), redisFlags(), []cli.Flag{
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
			return withRunBackends(ctx, cmd, func(st *cassandra.Store, cfg operator.Config) error {
				cfg.Checkpoints = st
				job, err := operator.New(cfg).ResumeRun(ctx, runID)
				if errors.Is(err, operator.ErrNotSuspended) {
					return fmt.Errorf("run %s is not suspended: nothing to resume", runID)
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.Root().Writer, "%s\tresumed (job %s)\n", runID, job)
				return nil
			})
		},
	}
}
