package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"time"

	"github.com/urfave/cli/v3"
	"google.golang.org/protobuf/proto"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

func triggerCommand() *cli.Command {
	return &cli.Command{
		Name:      "trigger",
		Usage:     "run a job or a DAG now: produce a Trigger to sundial.triggers",
		ArgsUsage: "JOB_ID|DAG_ID",
		Description: `The run's due time is the trigger record's timestamp, so its run id is
JOB_ID@<that time in unix milliseconds>. Sending the same --key again (a retry
after a timeout) starts no second run. Without --key the command makes up a
unique key and prints it: pass it as --key to retry that request safely. A trigger of an unknown, deleted or
paused job is refused with a SKIPPED event on sundial.events.

An id that names a DAG starts a run of that DAG, due at the trigger's time,
with the same idempotency rule; a paused DAG is refused. --payload is not used
for a DAG.

Examples:
  sundial trigger billing.rebuild-ledger
  sundial trigger billing.rebuild-ledger --key ticket-4711
  sundial trigger nightly-etl --key backfill-2026-11-20`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "key", Usage: "idempotency key, unique per request (default: a new random key, printed)", Sources: envVar("key")},
			&cli.StringFlag{Name: "payload", Usage: "replaces the job's payload for this run", Sources: envVar("payload")},
			&cli.StringFlag{Name: "caller", Value: os.Getenv("USER"), Usage: "who asks, for audit", Sources: envVar("caller")},
			&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second, Usage: "give up after this long", Sources: envVar("timeout")},
		}, kafkaFlags()...),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() != 1 {
				return fmt.Errorf("name one job or DAG id, got %d arguments", cmd.Args().Len())
			}
			key, generated := cmd.String("key"), false
			if key == "" {
				key, generated = "cli-"+rand.Text(), true
			}
			t := &sundialv1.Trigger{JobId: cmd.Args().First(), IdempotencyKey: key, Caller: cmd.String("caller")}
			if cmd.IsSet("payload") {
				t.Payload = []byte(cmd.String("payload"))
			}
			c, kopts, err := newClient(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(ctx, cmd.Duration("timeout"))
			defer cancel()
			return guardKafka(ctx, kopts, func(ctx context.Context) error {
				r, err := c.SendTrigger(ctx, proto.Clone(t).(*sundialv1.Trigger))
				if err != nil {
					return err
				}
				runID := store.RunID(r.ID, r.Timestamp.Truncate(time.Millisecond))
				if generated {
					fmt.Fprintf(cmd.Root().Writer, "%s\ttriggered (%s[%d]@%d); run id %s, key %q (generated: pass it as --key to retry this request)\n",
						r.ID, r.Topic, r.Partition, r.Offset, runID, key)
					return nil
				}
				fmt.Fprintf(cmd.Root().Writer, "%s\ttriggered (%s[%d]@%d); run id %s unless key %q was used before\n",
					r.ID, r.Topic, r.Partition, r.Offset, runID, key)
				return nil
			})
		},
	}
}
