package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/leasing"
	"github.com/sundialhq/sundial/operator"
	"github.com/sundialhq/sundial/runner"
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
			runID, err := oneID(cmd, "run id")
			if err != nil {
				return err
			}
			job := cmd.String("job")
			if job == "" {
				if job = operator.JobOfRun(runID); job == "" {
					return fmt.Errorf("run id %q: not JOB@millis; name its job with --job", runID)
				}
			}
			kopts, err := kafkaOptions(cmd)
			if err != nil {
				return err
			}
			rdb, err := redisClient(cmd, 4)
			if err != nil {
				return err
			}
			defer func() { _ = rdb.Close() }()
			prefix := cmd.String("redis-key-prefix")
			leases, err := leasing.New(leasing.Config{Client: rdb, KeyPrefix: prefix + leasing.DefaultKeyPrefix})
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, cmd.Duration("timeout"))
			defer cancel()
			if err := checkRedis(ctx, rdb); err != nil {
				return err
			}
			op := operator.New(operator.Config{Leases: leases, Redis: rdb, RunnerKeyPrefix: prefix + runner.DefaultKeyPrefix,
				Kafka: kopts, Topics: topics.Names{Prefix: cmd.String("topic-prefix")}})
			res, err := op.Suspend(ctx, job, runID, operator.SuspendOptions{Wait: cmd.Bool("wait")})
			if errors.Is(err, operator.ErrNotRunning) {
				return fmt.Errorf("run %s is not running (no runner holds its lease): nothing to suspend", runID)
			}
			if err != nil {
				return err
			}
			out := cmd.Root().Writer
			fmt.Fprintf(out, "%s\tsuspend requested\n", runID)
			if res.Event != nil {
				fmt.Fprintln(out, eventLine(res.Event))
			}
			return nil
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
			runID, err := oneID(cmd, "run id")
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, cmd.Duration("timeout"))
			defer cancel()
			return withStore(ctx, cmd, nil, func(st *cassandra.Store) error {
				kopts, err := kafkaOptions(cmd)
				if err != nil {
					return err
				}
				rdb, err := redisClient(cmd, 4)
				if err != nil {
					return err
				}
				defer func() { _ = rdb.Close() }()
				if err := checkRedis(ctx, rdb); err != nil {
					return err
				}
				enq, closeEnq, err := newEnqueuer(ctx, cmd, st, kopts)
				if err != nil {
					return err
				}
				defer closeEnq()
				op := operator.New(operator.Config{Checkpoints: st, Enqueuer: enq, Redis: rdb,
					RunnerKeyPrefix: cmd.String("redis-key-prefix") + runner.DefaultKeyPrefix})
				job, err := op.ResumeRun(ctx, runID)
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
