package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/lateness"
	"github.com/sundialhq/sundial/store"
)

func runsCommand() *cli.Command {
	return &cli.Command{
		Name:  "runs",
		Usage: "list and inspect runs and their logs; cancel, suspend, resume or retry one",
		Commands: []*cli.Command{
			runsListCommand(),
			runsGetCommand(),
			runsLogsCommand(),
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
		Usage: "print recent runs, newest first: a job's with its summary, or a team's across jobs",
		Description: `Reads the history that 'sundial history' stores from the run events, from
Cassandra, or through the control-plane API when --api-url is set.

With --job, lists that job's attempts and its summary. Without it, lists a
team's attempts of every job due since --since (default 1h): the team of the
API token with --api-url (a cluster admin names one with --team), the one
--team names when reading Cassandra. LATE BY is how long after its due time
an attempt started (or, not started yet, has waited so far); REASON is the
last wait the attempt reported (no executor, pool full, team quota, team
rate, overlap, breaker open, backlog, catch up, dispatch delay).

Examples:
  sundial runs list --job nightly-report --limit 20
  sundial runs list --team billing --late-by 5s
  sundial runs list --team billing --state failed --since 24h`,
		Flags: append(append(cassandraStoreFlags(), apiFlags()...),
			&cli.StringFlag{Name: "job", Usage: "only this job's runs, with its summary", Sources: envVar("job")},
			&cli.StringFlag{Name: "team", Usage: "only this team's runs (without --job: whose runs to list)", Sources: envVar("team")},
			&cli.StringSliceFlag{Name: "state", Usage: "only attempts in this state (scheduled, running, succeeded, failed, skipped, cancelled, suspended); repeatable", Sources: envVar("state")},
			&cli.StringFlag{Name: "since", Usage: "only runs due since this RFC 3339 instant or this long ago (default without --job: 1h)", Sources: envVar("since")},
			&cli.DurationFlag{Name: "late-by", Usage: "only attempts that started at least this late, or have waited this long", Sources: envVar("late-by")},
			&cli.IntFlag{Name: "limit", Value: 20, Usage: "how many attempts to print", Sources: envVar("limit")},
			outputFlag(),
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			f, bad := runFilterOf(cmd, time.Now())
			if cmd.Int("limit") <= 0 {
				bad = append(bad, fmt.Errorf("--limit %d: must be positive", cmd.Int("limit")))
			}
			if _, err := outputOf(cmd); err != nil {
				bad = append(bad, err)
			}
			return withRunSource(ctx, cmd, bad, func(src runSource) error {
				e := emitter{w: cmd.Root().Writer, form: must(outputOf(cmd))}
				if job := cmd.String("job"); job != "" {
					return printRuns(ctx, e, src, job, cmd.Int("limit"), f)
				}
				return printTeamRuns(ctx, e, src, cmd.Int("limit"), f)
			})
		},
	}
}

// runFilterOf reads the selection flags of runs list and reports every bad
// one.
func runFilterOf(cmd *cli.Command, now time.Time) (runFilter, []error) {
	var bad []error
	f := runFilter{team: cmd.String("team"), lateBy: cmd.Duration("late-by"), now: now}
	for _, s := range cmd.StringSlice("state") {
		st := store.RunState(strings.ToLower(s))
		if !st.Valid() {
			bad = append(bad, fmt.Errorf("--state %q: not a run state (scheduled, running, succeeded, failed, skipped, cancelled, suspended)", s))
			continue
		}
		f.states = append(f.states, st)
	}
	since := cmd.String("since")
	if since == "" && cmd.String("job") == "" {
		since = "1h"
	}
	var err error
	if f.since, err = parseWhen("since", since, now); err != nil {
		bad = append(bad, err)
	}
	if f.lateBy < 0 {
		bad = append(bad, fmt.Errorf("--late-by %s: must not be negative", f.lateBy))
	}
	return f, bad
}

// printRuns writes a job's summary and recent runs as a table.
func printRuns(ctx context.Context, e emitter, src runSource, job string, limit int, f runFilter) error {
	sum, runs, err := src.jobRuns(ctx, job, limit, f)
	if err != nil {
		return err
	}
	out := e.w
	if e.structured() {
		return emitAttempts(e, runs)
	}
	fmt.Fprintf(out, "job %s: %d run(s), %d attempt(s), %d failure(s)", job, sum.Runs, sum.Attempts, sum.Failures)
	if sum.LastRun != nil {
		fmt.Fprintf(out, "; last %s %s", sum.LastRun.RunID, sum.LastRun.State)
	}
	if !sum.NextDue.IsZero() {
		fmt.Fprintf(out, "; next due %s", sum.NextDue.UTC().Format(time.RFC3339))
	}
	fmt.Fprintln(out)
	return attemptTable(out, runs, false)
}

// printTeamRuns writes a team's recent runs of every job as a table.
func printTeamRuns(ctx context.Context, e emitter, src runSource, limit int, f runFilter) error {
	runs, err := src.teamRuns(ctx, limit, f)
	if err != nil {
		return err
	}
	if e.structured() {
		return emitAttempts(e, runs)
	}
	team := f.team
	if team == "" {
		team = "of the token"
	}
	fmt.Fprintf(e.w, "team %s: %d attempt(s) due since %s\n", team, len(runs), f.since.UTC().Format(time.RFC3339))
	return attemptTable(e.w, runs, true)
}

func emitAttempts(e emitter, runs []store.RunRecord) error {
	for _, r := range runs {
		if err := e.emit(attemptView(r)); err != nil {
			return err
		}
	}
	return nil
}

// attemptTable writes runs as the table of runs list; withJob adds the
// JOB column of a list across jobs.
func attemptTable(out io.Writer, runs []store.RunRecord, withJob bool) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	job := ""
	if withJob {
		job = "JOB\t"
	}
	fmt.Fprintln(w, job+"RUN ID\tATTEMPT\tSTATE\tDUE\tSTARTED\tLATE BY\tREASON\tDURATION\tERROR")
	for _, r := range runs {
		v := attemptView(r)
		if withJob {
			fmt.Fprintf(w, "%s\t", v.JobID)
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v.RunID, v.Attempt, v.State,
			v.AttemptDue.Format(stampMillis), orDash(timeText(v.Started)), orDash(v.LateBy), lateness.Reason(v.WaitReason).Text(),
			orDash(v.Duration), truncate(v.Error, 80))
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
	// WaitReason is the last wait the attempt reported (package
	// lateness); Dispatched, Received and Leased its timeline.
	WaitReason string     `json:"waitReason,omitempty"`
	OwnerTeam  string     `json:"ownerTeam,omitempty"`
	Dispatched *time.Time `json:"dispatched,omitempty"`
	Received   *time.Time `json:"received,omitempty"`
	Leased     *time.Time `json:"leased,omitempty"`
}

// attemptView is r as printed: times in UTC, the attempt's due time
// filled in (a first attempt's is the run's), and how late it started.
func attemptView(r store.RunRecord) attemptOut {
	v := attemptOut{JobID: r.JobID, RunID: r.RunID, Attempt: r.Attempt, State: string(r.State), Due: r.Due.UTC(),
		AttemptDue: r.AttemptDue.UTC(), Error: r.Error, Log: r.Log, WaitReason: r.WaitReason, OwnerTeam: r.OwnerTeam,
		Dispatched: utcOrNil(r.Dispatched), Received: utcOrNil(r.Received), Leased: utcOrNil(r.Leased)}
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

// utcOrNil is t in UTC, or nil for the zero time.
func utcOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
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

// printRun writes every attempt of one run, oldest first: its timeline
// (due → dispatched → received → leased → started, each gap with its
// duration), the waits it reported with their reasons, and its log lines.
func printRun(ctx context.Context, e emitter, src runSource, job, runID string, scan int) error {
	attempts, events, err := src.runAttempts(ctx, job, runID, scan)
	if err != nil {
		return err
	}
	out := e.w
	if e.structured() {
		return emitAttempts(e, attempts)
	}
	explained := map[uint32]lateness.Explanation{}
	for _, x := range lateness.Explain(events) {
		explained[x.Attempt] = x
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
		printTimeline(out, r, explained[uint32(r.Attempt)])
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

// printTimeline writes an attempt's timeline when more than its due and
// start times are known, then the waits it reported: the deferrals the
// events tell of, and the record's last wait reason.
func printTimeline(out io.Writer, r store.RunRecord, x lateness.Explanation) {
	t := lateness.Times{Due: cmp.Or(r.AttemptDue, r.Due), Dispatched: r.Dispatched, Received: r.Received, Leased: r.Leased, Started: r.Started}
	if t.Dispatched.IsZero() {
		t.Dispatched = x.Times.Dispatched
	}
	if !t.Dispatched.IsZero() || !t.Received.IsZero() || !t.Leased.IsZero() {
		fmt.Fprintln(out, "  timeline:")
		for _, st := range t.Breakdown() {
			switch {
			case st.At.IsZero():
				fmt.Fprintf(out, "    %-10s  -\n", st.Name)
			case st.Name == "due":
				fmt.Fprintf(out, "    %-10s  %s\n", st.Name, st.At.UTC().Format(stampMillis))
			default:
				fmt.Fprintf(out, "    %-10s  %s  +%s\n", st.Name, st.At.UTC().Format(stampMillis), st.Gap.Round(time.Millisecond))
			}
		}
	}
	for _, d := range x.Deferrals {
		fmt.Fprintf(out, "  waited: %s, deferred at %s until %s\n", d.Reason.Text(), d.At.UTC().Format(stampMillis), d.Until.UTC().Format(stampMillis))
	}
	reason := lateness.Reason(r.WaitReason)
	if reason == lateness.None {
		reason = x.Reason
	}
	if reason != lateness.None {
		fmt.Fprintf(out, "  reason: %s\n", reason.Text())
	}
}
