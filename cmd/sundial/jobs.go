package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/client"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/cassandra"
)

func jobsCommand() *cli.Command {
	return &cli.Command{
		Name:  "jobs",
		Usage: "define, delete and inspect jobs",
		Commands: []*cli.Command{
			jobsApplyCommand(),
			jobsDeleteCommand(),
			jobsGetCommand(),
			jobsListCommand(),
			jobsPauseCommand(),
			jobsResumeCommand(),
			jobsBackfillCommand(),
		},
	}
}

// waitFlags are the flags of commands that wait for the registry's answer.
func waitFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "wait", Value: true, Usage: "wait for the registry's answer on sundial.jobs.status and print it", Sources: envVar("wait")},
		&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second, Usage: "give up waiting after this long", Sources: envVar("timeout")},
		teamFlag(),
	}
}

// teamFlag names the team whose topic, sundial.jobs.<team>, definitions
// and deletes go to.
func teamFlag() cli.Flag {
	return &cli.StringFlag{Name: "team", Usage: "produce to the team's topic sundial.jobs.<team> (definitions must name it as owner_team); default: each definition to its owner_team's topic, each delete to the topic of the team its id starts with", Sources: envVar("team")}
}

// newClient returns a producer client of Sundial's topics and the Kafka
// options it was built with, for guardKafka.
func newClient(cmd *cli.Command) (*client.Client, []kgo.Opt, error) {
	opts, err := kafkaOptions(cmd)
	if err != nil {
		return nil, nil, err
	}
	c, err := client.New(client.Config{Kafka: opts, Topics: topics.Names{Prefix: cmd.String("topic-prefix")},
		Team: cmd.String("team"), ByOwner: true})
	return c, opts, err
}

func jobsDeleteCommand() *cli.Command {
	return &cli.Command{
		Name:      "delete",
		Usage:     "delete jobs: produce a tombstone for each id to sundial.jobs",
		ArgsUsage: "ID...",
		Flags:     slices.Concat(kafkaFlags(), waitFlags(), apiFlags()),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			ids := cmd.Args().Slice()
			if len(ids) == 0 {
				return errors.New("name at least one job id")
			}
			if api, ok, err := apiConfig(cmd); ok || err != nil {
				if err != nil {
					return err
				}
				ctx, cancel := context.WithTimeout(ctx, cmd.Duration("timeout"))
				defer cancel()
				return deleteThroughAPI(ctx, cmd, api, ids)
			}
			c, kopts, err := newClient(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(ctx, cmd.Duration("timeout"))
			defer cancel()
			return guardKafka(ctx, kopts, func(ctx context.Context) error {
				var receipts []client.Receipt
				for _, id := range ids {
					r, err := c.Delete(ctx, id)
					if err != nil {
						return err
					}
					receipts = append(receipts, r)
				}
				return report(ctx, cmd, c, receipts)
			})
		},
	}
}

// report prints what was produced and, with --wait, the answers.
func report(ctx context.Context, cmd *cli.Command, c *client.Client, receipts []client.Receipt) error {
	out := cmd.Root().Writer
	if !cmd.Bool("wait") {
		for _, r := range receipts {
			fmt.Fprintf(out, "%s\tproduced to %s[%d]@%d\n", r.ID, r.Topic, r.Partition, r.Offset)
		}
		return nil
	}
	statuses, err := c.WaitStatus(ctx, receipts...)
	rejected := 0
	for i, r := range receipts {
		st := statuses[i]
		if st == nil {
			fmt.Fprintf(out, "%s\tno answer yet (%s[%d]@%d)\n", r.ID, r.Topic, r.Partition, r.Offset)
			continue
		}
		line := fmt.Sprintf("%s\t%s", r.ID, outcomeName(st.GetOutcome()))
		if next := st.GetNextDueTime(); next != nil {
			line += "\tnext due " + next.AsTime().Format(time.RFC3339Nano)
		}
		fmt.Fprintf(out, "%s\n", line)
		for _, e := range st.GetErrors() {
			fmt.Fprintf(out, "  %s: %s\n", e.GetField(), e.GetReason())
		}
		if st.GetOutcome() == sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_REJECTED {
			rejected++
		}
	}
	if err != nil {
		return fmt.Errorf("is the registry running? %w", err)
	}
	if rejected > 0 {
		return fmt.Errorf("%d of %d definitions rejected", rejected, len(receipts))
	}
	return nil
}

func outcomeName(o sundialv1.DefinitionOutcome) string {
	name := o.String()
	const prefix = "DEFINITION_OUTCOME_"
	if len(name) > len(prefix) {
		return name[len(prefix):]
	}
	return name
}

func jobsGetCommand() *cli.Command {
	return &cli.Command{
		Name:      "get",
		Usage:     "print a job as the store holds it: its definition, revision, next due time (after now, in its time zone) and run summary",
		ArgsUsage: "ID",
		Flags: append(cassandraStoreFlags(),
			&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second, Usage: "give up after this long", Sources: envVar("timeout")},
			outputFlag(),
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			var bad []error
			id, err := oneArg(cmd, "job id")
			if err != nil {
				bad = append(bad, err)
			}
			form, err := outputOf(cmd)
			if err != nil {
				bad = append(bad, err)
			}
			ctx, cancel := context.WithTimeout(ctx, cmd.Duration("timeout"))
			defer cancel()
			return withStore(ctx, cmd, bad, func(st *cassandra.Store) error {
				job, err := st.GetJob(ctx, id)
				if errors.Is(err, store.ErrNotFound) {
					return fmt.Errorf("job %q: not found", id)
				}
				if err != nil {
					return err
				}
				summary, err := st.JobSummary(ctx, id)
				if err != nil {
					return err
				}
				if out := (emitter{w: cmd.Root().Writer, form: form}); out.structured() {
					v, err := jobView(job, summary, time.Now())
					if err != nil {
						return err
					}
					return out.emit(v)
				}
				return printJob(cmd.Root().Writer, job, summary, time.Now())
			})
		},
	}
}

// printJob prints a stored job. Its next due time is the first occurrence of
// its schedule after now, in the schedule's time zone; an attempt already
// due and not yet started is printed apart, as pending.
func printJob(w io.Writer, job store.Job, summary store.Summary, now time.Time) error {
	fmt.Fprintf(w, "id:          %s\n", job.ID)
	fmt.Fprintf(w, "revision:    %d (offset of its record on sundial.jobs)\n", job.Revision)
	fmt.Fprintf(w, "updated at:  %s\n", job.UpdatedAt.Format(time.RFC3339Nano))
	if job.Deleted {
		fmt.Fprintf(w, "deleted:     yes\n")
		return nil
	}
	spec := &sundialv1.JobSpec{}
	if err := proto.Unmarshal(job.Spec, spec); err != nil {
		return fmt.Errorf("job %q: the stored definition does not decode: %w", job.ID, err)
	}
	switch next, ok := jobspec.NextDue(spec, job.UpdatedAt, now); {
	case ok:
		fmt.Fprintf(w, "next due:    %s (%s)\n", next.Format(time.RFC3339), next.Location())
	case spec.GetPaused():
		fmt.Fprintf(w, "next due:    none (paused)\n")
	case spec.GetSchedule() == nil:
		fmt.Fprintf(w, "next due:    none (trigger only)\n")
	default:
		fmt.Fprintf(w, "next due:    none (no occurrence after now)\n")
	}
	if !summary.NextDue.IsZero() && !summary.NextDue.After(now) {
		fmt.Fprintf(w, "pending:     %s (due, not started yet)\n", summary.NextDue.UTC().Format(time.RFC3339Nano))
	}
	if last := summary.LastRun; last != nil {
		fmt.Fprintf(w, "last run:    %s attempt %d %s\n", last.RunID, last.Attempt, last.State)
	}
	fmt.Fprintf(w, "runs:        %d (%d attempts, %d failed)\n", summary.Runs, summary.Attempts, summary.Failures)
	fmt.Fprintf(w, "schedule:    %s\n", jobspec.ScheduleInForce(spec.GetSchedule()))
	jobspec.Redact(spec) // a terminal is no place for a downstream's credentials either
	js, err := protojson.MarshalOptions{Multiline: true}.Marshal(spec)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "definition:\n%s\n", js)
	return nil
}

// jobOut is a stored job as -o json and yaml print it: what printJob
// says, with the definition (credentials redacted) as an object.
type jobOut struct {
	ID        string    `json:"id"`
	Revision  int64     `json:"revision"`
	UpdatedAt time.Time `json:"updatedAt"`
	Deleted   bool      `json:"deleted,omitempty"`
	// NextDue is the next occurrence after now; absent for none.
	NextDue    *time.Time      `json:"nextDue,omitempty"`
	Runs       int             `json:"runs"`
	Attempts   int             `json:"attempts"`
	Failures   int             `json:"failures"`
	LastRunID  string          `json:"lastRunId,omitempty"`
	Definition json.RawMessage `json:"definition,omitempty"`
}

func jobView(job store.Job, summary store.Summary, now time.Time) (jobOut, error) {
	v := jobOut{ID: job.ID, Revision: job.Revision, UpdatedAt: job.UpdatedAt.UTC(), Deleted: job.Deleted,
		Runs: summary.Runs, Attempts: summary.Attempts, Failures: summary.Failures}
	if last := summary.LastRun; last != nil {
		v.LastRunID = last.RunID
	}
	if job.Deleted {
		return v, nil
	}
	spec := &sundialv1.JobSpec{}
	if err := proto.Unmarshal(job.Spec, spec); err != nil {
		return v, fmt.Errorf("job %q: the stored definition does not decode: %w", job.ID, err)
	}
	if next, ok := jobspec.NextDue(spec, job.UpdatedAt, now); ok {
		v.NextDue = &next
	}
	jobspec.Redact(spec)
	js, err := protojson.Marshal(spec)
	if err != nil {
		return v, err
	}
	v.Definition = js
	return v, nil
}
