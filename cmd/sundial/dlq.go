package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/runner/deadletter"
	"github.com/sundialhq/sundial/store"
)

func dlqCommand() *cli.Command {
	return &cli.Command{
		Name:  "dlq",
		Usage: "list and replay dead runs (sundial.dlq)",
		Commands: []*cli.Command{
			dlqListCommand(),
			dlqReplayCommand(),
		},
	}
}

// dlqFilterFlags select dead letters.
func dlqFilterFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "job", Usage: "only runs of this job id", Sources: envVar("job")},
		&cli.StringFlag{Name: "run-id", Usage: "only this run id", Sources: envVar("run-id")},
		&cli.StringFlag{Name: "since", Usage: "only runs declared dead at or after this: RFC 3339, or a duration meaning that long ago (24h)", Sources: envVar("since")},
		&cli.StringFlag{Name: "until", Usage: "only runs declared dead before this: RFC 3339, or a duration meaning that long ago", Sources: envVar("until")},
	}
}

// parseWhen reads an RFC 3339 instant or a duration before now.
func parseWhen(flag, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("--%s %q: want an RFC 3339 instant or a non-negative duration", flag, v)
}

// dlqFilter reads the selection flags and checks the Kafka flags.
func dlqFilter(cmd *cli.Command, now time.Time) (deadletter.Filter, error) {
	f, err := dlqSelection(cmd, now)
	if _, kerr := kafkaOptions(cmd); kerr != nil {
		err = errors.Join(err, kerr)
	}
	return f, err
}

// dlqSelection reads the selection flags.
func dlqSelection(cmd *cli.Command, now time.Time) (deadletter.Filter, error) {
	f := deadletter.Filter{JobID: cmd.String("job"), RunID: cmd.String("run-id")}
	var errs []error
	var err error
	if f.Since, err = parseWhen("since", cmd.String("since"), now); err != nil {
		errs = append(errs, err)
	}
	if f.Until, err = parseWhen("until", cmd.String("until"), now); err != nil {
		errs = append(errs, err)
	}
	return f, errors.Join(errs...)
}

func dlqListCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "print dead runs, oldest first",
		Description: `Reads sundial.dlq, or the API's dead-letter service when --api-url is set.

Example:
  sundial dlq list --job nightly-report --since 24h`,
		Flags: append(append(append(kafkaFlags(), apiFlags()...), dlqFilterFlags()...), outputFlag()),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			form, oerr := outputOf(cmd)
			f, err := dlqSelection(cmd, time.Now())
			if err := errors.Join(err, oerr); err != nil {
				return err
			}
			dls, err := deadLetters(ctx, cmd, f)
			if err != nil {
				return err
			}
			if out := (emitter{w: cmd.Root().Writer, form: form}); out.structured() {
				for _, dl := range dls {
					if err := out.emit(dl); err != nil {
						return err
					}
				}
				return nil
			}
			w := tabwriter.NewWriter(cmd.Root().Writer, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "DEAD AT\tJOB\tRUN ID\tATTEMPTS\tERROR")
			for _, dl := range dls {
				msg := dl.GetLastError().GetCode()
				if m := dl.GetLastError().GetMessage(); m != "" {
					msg += ": " + m
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", dl.GetDeadAt().AsTime().UTC().Format(time.RFC3339), dl.GetRun().GetJobId(),
					dl.GetRun().GetRunId(), dl.GetAttempts(), strings.ReplaceAll(truncate(msg, 120), "\n", " "))
			}
			if err := w.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(cmd.Root().Writer, "%d dead run(s)\n", len(dls))
			return nil
		},
	}
}

func dlqReplayCommand() *cli.Command {
	return &cli.Command{
		Name:  "replay",
		Usage: "run dead runs again with their job's current definition, same run ids, as a new attempt",
		Description: `Each selected run (once, from its newest dead letter) is written as a due entry
due now; the dispatcher fires it like any retry. It runs with the job's
current definition (fix the job, apply it, then replay), as the API's
ReplayDeadLetters does; a run whose job is gone is skipped. The run id stays
the same, so the downstream still sees one idempotency key; the replay is a
new attempt after the dead run's, so "runs get" keeps the earlier ones, and
the job's retry policy counts from the replay. A dead run never completed, so
there is no dedupe mark to clear. At least one of --job, --run-id, --since,
--until or --all is required. --dry-run reads no store: it lists the runs
selected, including any the replay would skip.

Example:
  sundial dlq replay --job nightly-report --since 24h`,
		Flags: append(append(append(kafkaFlags(), cassandraStoreFlags()...), dlqFilterFlags()...),
			&cli.BoolFlag{Name: "all", Usage: "replay every dead run", Sources: envVar("all")},
			&cli.BoolFlag{Name: "dry-run", Usage: "print what would be replayed, replay nothing", Sources: envVar("dry-run")},
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			now := time.Now()
			f, err := dlqFilter(cmd, now)
			if f == (deadletter.Filter{}) && !cmd.Bool("all") {
				err = errors.Join(err, errors.New("select runs with --job, --run-id, --since or --until, or pass --all"))
			}
			if _, cerr := cassandraConfig(cmd); cerr != nil && !cmd.Bool("dry-run") {
				err = errors.Join(err, cerr)
			}
			if err != nil {
				return err
			}
			names := topics.Names{Prefix: cmd.String("topic-prefix")}
			kopts, err := kafkaOptions(cmd)
			if err != nil {
				return err
			}
			if err := checkKafka(ctx, kopts); err != nil {
				return err
			}
			dls, err := deadletter.Read(ctx, kopts, names.DLQ(), f)
			if err != nil {
				return err
			}
			entries, err := deadletter.ReplayEntries(dls, now)
			if err != nil {
				return err
			}
			for _, e := range entries {
				fmt.Fprintf(cmd.Root().Writer, "replay %s\n", e.RunID)
			}
			if cmd.Bool("dry-run") || len(entries) == 0 {
				fmt.Fprintf(cmd.Root().Writer, "%d run(s) to replay (dry run: %v)\n", len(entries), cmd.Bool("dry-run"))
				return nil
			}
			logger := slog.New(slog.NewTextHandler(cmd.Root().ErrWriter, nil))
			enq, st, closeStore, err := openEnqueuer(ctx, cmd, names, logger)
			if err != nil {
				return err
			}
			defer closeStore()
			replay, skipped, err := withCurrentDefinitions(ctx, st, entries)
			if err != nil {
				return fmt.Errorf("replay: %w", err)
			}
			for _, id := range skipped {
				fmt.Fprintf(cmd.Root().Writer, "skip %s: its job is gone\n", id)
			}
			if len(replay) > 0 {
				if err := enq.Enqueue(ctx, replay...); err != nil {
					return fmt.Errorf("replay: %w", err)
				}
			}
			fmt.Fprintf(cmd.Root().Writer, "%d run(s) replayed, %d skipped\n", len(replay), len(skipped))
			return nil
		},
	}
}

// withCurrentDefinitions gives each replay entry its job's current
// definition (deadletter.WithDefinition, the API's rule too) and returns the
// run ids of those whose job is gone, which are not replayed.
func withCurrentDefinitions(ctx context.Context, jobs deadletter.Jobs, entries []store.DueEntry) (replay []store.DueEntry, skipped []string, _ error) {
	for _, e := range entries {
		spec, revision, ok, err := deadletter.Current(ctx, jobs, e.JobID)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			skipped = append(skipped, e.RunID)
			continue
		}
		if err := deadletter.WithDefinition(&e, spec, revision); err != nil {
			return nil, nil, err
		}
		replay = append(replay, e)
	}
	return replay, skipped, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
