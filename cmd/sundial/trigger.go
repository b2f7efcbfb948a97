package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/operator"
	"github.com/urfave/cli/v3"
)

func triggerCommand() *cli.Command {
	return &cli.Command{
		Name:      "trigger",
		Usage:     "run a job or a DAG now, and with --wait follow a job's run to its end",
		ArgsUsage: "JOB_ID|DAG_ID",
		Description: `Produces a Trigger, due now, to sundial.triggers and prints the run id,
JOB_ID@<due time in unix milliseconds>. Sending the same --key again (a retry
after a timeout) starts no second run. Without --key the command makes up a
unique key and prints it: pass it as --key to retry that request safely. A
trigger of an unknown, deleted or paused job is refused with a SKIPPED event
on sundial.events.

An id that names a DAG starts a run of that DAG, due now, with the same
idempotency rule; a paused DAG is refused, and --payload is not used. Follow
it with 'sundial dag runs'.

With --wait it follows sundial.events until the job's run ends, prints its
last event and exits non-zero unless it SUCCEEDED (DEAD, CANCELLED, or
SKIPPED: a paused or unknown job).

Examples:
  sundial trigger billing.rebuild-ledger
  sundial trigger billing.rebuild-ledger --key ticket-4711
  sundial trigger billing.rebuild-ledger --wait --timeout 10m
  sundial trigger nightly-etl --key backfill-2026-11-20`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "key", Usage: "idempotency key, unique per request (default: a new random key, printed)", Sources: envVar("key")},
			&cli.StringFlag{Name: "payload", Usage: "replaces the job's payload for this run", Sources: envVar("payload")},
			&cli.StringFlag{Name: "caller", Value: os.Getenv("USER"), Usage: "who asks, for audit", Sources: envVar("caller")},
			&cli.BoolFlag{Name: "wait", Usage: "wait for the job's run to end and exit non-zero unless it succeeded", Sources: envVar("wait")},
			timeoutFlag(5 * time.Minute),
		}, slices.Concat(kafkaFlags(), apiFlags())...),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			id, err := oneArg(cmd, "job or DAG id")
			if err != nil {
				return err
			}
			key, generated := cmd.String("key"), false
			if key == "" {
				key, generated = "cli-"+rand.Text(), true
			}
			opts := operator.TriggerOptions{IdempotencyKey: key, Wait: cmd.Bool("wait"), Caller: cmd.String("caller")}
			if cmd.IsSet("payload") {
				opts.Payload = []byte(cmd.String("payload"))
			}
			ctx, cancel := context.WithTimeout(ctx, cmd.Duration("timeout"))
			defer cancel()
			report := func(res operator.TriggerResult, err error) error {
				out := cmd.Root().Writer
				if res.RunID != "" && (err == nil || opts.Wait) {
					if generated {
						fmt.Fprintf(out, "%s\ttriggered\trun %s, key %q (generated: pass it as --key to retry this request)\n", id, res.RunID, key)
					} else {
						fmt.Fprintf(out, "%s\ttriggered\trun %s unless key %q was used before\n", id, res.RunID, key)
					}
				}
				if err != nil || !opts.Wait {
					return err
				}
				fmt.Fprintln(out, eventLine(res.Event))
				if !res.Succeeded() {
					return fmt.Errorf("run %s ended %s", res.RunID, stateName(res.Event.GetState()))
				}
				return nil
			}
			if ops, ok, err := apiOperations(cmd); ok || err != nil {
				if err != nil {
					return err
				}
				return report(ops.trigger(ctx, id, opts))
			}
			c, kopts, err := newClient(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			return guardKafka(ctx, kopts, func(ctx context.Context) error {
				op := operator.New(operator.Config{Producer: c, Kafka: kopts, Topics: topics.Names{Prefix: cmd.String("topic-prefix")}})
				return report(operationsDirect{op}.trigger(ctx, id, opts))
			})
		},
	}
}
