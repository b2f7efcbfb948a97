package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/cassandra"
)

func runsCommand() *cli.Command {
	return &cli.Command{
		Name:  "runs",
		Usage: "inspect run history",
		Commands: []*cli.Command{
			runsListCommand(),
		},
	}
}

func runsListCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "print a job's recent runs, newest first, with its summary",
		Description: `Reads the history that 'sundial history' stores from the run events.

Example:
  sundial runs list --job nightly-report --limit 20`,
		Flags: append(cassandraStoreFlags(),
			&cli.StringFlag{Name: "job", Usage: "the job id (required)", Sources: envVar("job")},
			&cli.IntFlag{Name: "limit", Value: 20, Usage: "how many attempts to print", Sources: envVar("limit")},
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			var bad []error
			if cmd.String("job") == "" {
				bad = append(bad, errors.New("--job: required"))
			}
			if cmd.Int("limit") <= 0 {
				bad = append(bad, fmt.Errorf("--limit %d: must be positive", cmd.Int("limit")))
			}
			cc, err := cassandraConfig(cmd)
			if err != nil {
				bad = append(bad, err)
			}
			if err := errors.Join(bad...); err != nil {
				return err
			}
			st, err := cassandra.Open(ctx, cc)
			if err != nil {
				return fmt.Errorf("cassandra: %w", err)
			}
			defer func() { _ = st.Close() }()
			return printRuns(ctx, cmd, st, cmd.String("job"), cmd.Int("limit"))
		},
	}
}

// printRuns writes a job's summary and recent runs as a table.
func printRuns(ctx context.Context, cmd *cli.Command, h store.History, job string, limit int) error {
	sum, err := h.JobSummary(ctx, job)
	if err != nil {
		return err
	}
	runs, err := h.ListRuns(ctx, job, limit)
	if err != nil {
		return err
	}
	out := cmd.Root().Writer
	fmt.Fprintf(out, "job %s: %d run(s), %d attempt(s), %d failure(s)", job, sum.Runs, sum.Attempts, sum.Failures)
	if sum.LastRun != nil {
		fmt.Fprintf(out, "; last %s %s", sum.LastRun.RunID, sum.LastRun.State)
	}
	if !sum.NextDue.IsZero() {
		fmt.Fprintf(out, "; next due %s", sum.NextDue.UTC().Format(time.RFC3339))
	}
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "RUN ID\tATTEMPT\tSTATE\tDUE\tSTARTED\tDURATION\tERROR")
	for _, r := range runs {
		started, dur := "-", "-"
		if !r.Started.IsZero() {
			started = r.Started.UTC().Format("2006-01-02T15:04:05.000Z")
		}
		if r.Duration > 0 || r.State == store.StateSucceeded {
			dur = r.Duration.String()
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", r.RunID, r.Attempt, r.State,
			r.AttemptDue.UTC().Format("2006-01-02T15:04:05.000Z"), started, dur, truncate(r.Error, 80))
	}
	return w.Flush()
}
