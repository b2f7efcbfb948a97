package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/store"
)

func runsCommand() *cli.Command {
	return &cli.Command{
		Name:  "runs",
		Usage: "inspect run history",
		Commands: []*cli.Command{
			runsListCommand(),
			runsGetCommand(),
			runsCancelCommand(),
			runsSuspendCommand(),
			runsResumeCommand(),
			runsRetryCommand(),
		},
	}
}

func runsListCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "print a job's recent runs, newest first, with its summary",
		Description: `Reads the history that 'sundial history' stores from the run events, from
Cassandra, or through the control-plane API when --api-url is set.

Example:
  sundial runs list --job nightly-report --limit 20`,
		Flags: append(append(cassandraStoreFlags(), apiFlags()...),
			&cli.StringFlag{Name: "job", Usage: "the job id (required)", Sources: envVar("job")},
			&cli.IntFlag{Name: "limit", Value: 20, Usage: "how many attempts to print", Sources: envVar("limit")},
			outputFlag(),
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			var bad []error
			if cmd.String("job") == "" {
				bad = append(bad, errors.New("--job: required"))
			}
			if cmd.Int("limit") <= 0 {
				bad = append(bad, fmt.Errorf("--limit %d: must be positive", cmd.Int("limit")))
			}
			if _, err := outputOf(cmd); err != nil {
				bad = append(bad, err)
			}
			return withRunSource(ctx, cmd, bad, func(src runSource) error {
				return printRuns(ctx, emitter{w: cmd.Root().Writer, form: must(outputOf(cmd))}, src, cmd.String("job"), cmd.Int("limit"))
			})
		},
	}
}

// printRuns writes a job's summary and recent runs as a table.
func printRuns(ctx context.Context, e emitter, src runSource, job string, limit int) error {
	sum, runs, err := src.jobRuns(ctx, job, limit)
	if err != nil {
		return err
	}
	out := e.w
	if e.structured() {
		for _, r := range runs {
			if err := e.emit(attemptView(r)); err != nil {
				return err
			}
		}
		return nil
	}
	fmt.Fprintf(out, "job %s: %d run(s), %d attempt(s), %d failure(s)", job, sum.Runs, sum.Attempts, sum.Failures)
	if sum.LastRun != nil {
		fmt.Fprintf(out, "; last %s %s", sum.LastRun.RunID, sum.LastRun.State)
	}
	if !sum.NextDue.IsZero() {
		fmt.Fprintf(out, "; next due %s", sum.NextDue.UTC().Format(time.RFC3339))
	}
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "RUN ID\tATTEMPT\tSTATE\tDUE\tSTARTED\tLATE BY\tDURATION\tERROR")
	for _, r := range runs {
		v := attemptView(r)
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", v.RunID, v.Attempt, v.State,
			v.AttemptDue.Format(stampMillis), orDash(timeText(v.Started)), orDash(v.LateBy), orDash(v.Duration), truncate(v.Error, 80))
	}
	return w.Flush()
}

// stampMillis is how the run commands print an instant.
const stampMillis = "2006-01-02T15:04:05.000Z"

// attemptOut is one attempt as the run commands print it: the table's
// columns, and the JSON and YAML objects of -o.
type attemptOut struct {
	JobID      string     `json:"jobId"`
	RunID      string     `json:"runId"`
	Attempt    int        `json:"attempt"`
	State      string     `json:"state"`
	Due        time.Time  `json:"due"`
	AttemptDue time.Time  `json:"attemptDue"`
	Started    *time.Time `json:"started,omitempty"`
	Finished   *time.Time `json:"finished,omitempty"`
	// LateBy is how long after its due time the attempt started.
	LateBy   string   `json:"lateBy,omitempty"`
	Duration string   `json:"duration,omitempty"`
	Error    string   `json:"error,omitempty"`
	Log      []string `json:"log,omitempty"`
}

// attemptView is r as printed: times in UTC, the attempt's due time
// filled in (a first attempt's is the run's), and how late it started.
func attemptView(r store.RunRecord) attemptOut {
	v := attemptOut{JobID: r.JobID, RunID: r.RunID, Attempt: r.Attempt, State: string(r.State), Due: r.Due.UTC(),
		AttemptDue: r.AttemptDue.UTC(), Error: r.Error, Log: r.Log}
	if r.AttemptDue.IsZero() {
		v.AttemptDue = v.Due
	}
	if !r.Started.IsZero() {
		started := r.Started.UTC()
		v.Started = &started
		v.LateBy = max(started.Sub(v.AttemptDue), 0).Round(time.Millisecond).String()
	}
	if !r.Finished.IsZero() {
		finished := r.Finished.UTC()
		v.Finished = &finished
	}
	if r.Duration > 0 || r.State == store.StateSucceeded {
		v.Duration = r.Duration.String()
	}
	return v
}

// timeText is t in the run commands' form, or empty for none.
func timeText(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.Format(stampMillis)
}

func runsGetCommand() *cli.Command {
	return &cli.Command{
		Name:      "get",
		Usage:     "print every attempt of one run, with the log lines each attempt left",
		ArgsUsage: "RUN_ID",
		Description: `Reads the history the runners' history writer stores. The log lines are the
last ones a worker handler logged through its run logger, or the output of an
exec target, kept on the attempt's final event. With --api-url the run is read
through the control-plane API, which searches as many of the job's newest
attempts as the server allows (10,000 by default) whatever --scan says.

Example:
  sundial runs get nightly-report@1767148200000`,
		Flags: append(append(cassandraStoreFlags(), apiFlags()...),
			&cli.IntFlag{Name: "scan", Value: 1000, Usage: "how many of the job's newest attempts to search for the run", Sources: envVar("scan")},
			outputFlag(),
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			var bad []error
			runID := cmd.Args().First()
			job, _, err := splitRunID(runID)
			if err != nil {
				bad = append(bad, err)
			}
			if cmd.NArg() > 1 {
				bad = append(bad, fmt.Errorf("RUN_ID: one run id expected, got %d arguments", cmd.NArg()))
			}
			if cmd.Int("scan") <= 0 {
				bad = append(bad, fmt.Errorf("--scan %d: must be positive", cmd.Int("scan")))
			}
			if _, err := outputOf(cmd); err != nil {
				bad = append(bad, err)
			}
			return withRunSource(ctx, cmd, bad, func(src runSource) error {
				return printRun(ctx, emitter{w: cmd.Root().Writer, form: must(outputOf(cmd))}, src, job, runID, cmd.Int("scan"))
			})
		},
	}
}

// splitRunID returns the job id and due time a run id is made of
// (store.RunID).
func splitRunID(runID string) (string, time.Time, error) {
	i := strings.LastIndexByte(runID, '@')
	if i <= 0 {
		return "", time.Time{}, fmt.Errorf("RUN_ID %q: not a run id (job@unix-millis)", runID)
	}
	ms, err := strconv.ParseInt(runID[i+1:], 10, 64)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("RUN_ID %q: not a run id (job@unix-millis): %w", runID, err)
	}
	return runID[:i], time.UnixMilli(ms).UTC(), nil
}

// printRun writes every attempt of one run, oldest first, with its log
// lines.
func printRun(ctx context.Context, e emitter, src runSource, job, runID string, scan int) error {
	attempts, err := src.runAttempts(ctx, job, runID, scan)
	if err != nil {
		return err
	}
	out := e.w
	if e.structured() {
		for _, r := range attempts {
			if err := e.emit(attemptView(r)); err != nil {
				return err
			}
		}
		return nil
	}
	fmt.Fprintf(out, "run %s of job %s\n", runID, job)
	for _, r := range attempts {
		v := attemptView(r)
		fmt.Fprintf(out, "\nattempt %d: %s, due %s", v.Attempt, v.State, v.AttemptDue.Format(stampMillis))
		if v.Started != nil {
			fmt.Fprintf(out, ", started %s (%s late)", timeText(v.Started), v.LateBy)
		}
		if v.Duration != "" {
			fmt.Fprintf(out, ", took %s", v.Duration)
		}
		fmt.Fprintln(out)
		if r.Error != "" {
			fmt.Fprintf(out, "  error: %s\n", r.Error)
		}
		if len(r.Log) > 0 {
			fmt.Fprintln(out, "  log:")
			for _, l := range r.Log {
				fmt.Fprintf(out, "    %s\n", l)
			}
		}
	}
	return nil
}
