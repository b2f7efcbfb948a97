package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	connectrpc "connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v3"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/client"
	"github.com/sundialhq/sundial/dagengine"
	"github.com/sundialhq/sundial/dagengine/dag"
	"github.com/sundialhq/sundial/dagengine/dagrun"
	"github.com/sundialhq/sundial/enqueue"
	"github.com/sundialhq/sundial/internal/topics"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/cassandra"
)

func dagCommand() *cli.Command {
	return &cli.Command{
		Name:  "dag",
		Usage: "run the DAG engine, apply and delete DAGs, and inspect and resume DAG runs (sundial trigger starts one)",
		Description: `A DAG is defined like a job: a DagSpec produced to sundial.jobs, keyed by its
id, with the record header sundial-kind: dag. Each DAG run has the id
<dag id>@<due time in UTC unix ms>; its nodes start when all their parents
have succeeded in that run.`,
		Commands: []*cli.Command{
			dagApplyCommand(),
			dagDeleteCommand(),
			dagEngineCommand(),
			dagRunsCommand(),
			dagShowCommand(),
			dagResumeCommand(),
			dagValidateCommand(),
		},
	}
}

func dagEngineCommand() *cli.Command {
	return &cli.Command{
		Name:  "engine",
		Usage: "run the DAG engine: DAG definitions, schedules and node runs",
		Description: `Consumes DAG definitions from sundial.jobs (answering each on
sundial.jobs.status) and run events from sundial.events; starts DAG runs on
their schedules and each node when its parents have succeeded. Several
engines may run side by side: every change of a DAG run is a conditional
write, so none is lost and no node starts twice.

Example, against the local stack:
  source <(deploy/local/stack.sh env) && sundial dag engine --metrics-addr :9466`,
		Flags: append(append(append(kafkaFlags(), cassandraStoreFlags()...), processFlags()...),
			&cli.StringFlag{Name: "group-id", Usage: "consumer group on sundial.events (default <topic prefix>" + dagengine.DefaultGroup + ")", Sources: envVar("group-id")},
			&cli.StringFlag{Name: "definitions-group-id", Usage: "consumer group on sundial.jobs (default <topic prefix>" + dagengine.DefaultDefinitionsGroup + ")", Sources: envVar("definitions-group-id")},
			&cli.DurationFlag{Name: "sweep-interval", Value: 30 * time.Second, Usage: "how often every unfinished DAG run is visited and definitions re-read", Sources: envVar("sweep-interval")},
			&cli.DurationFlag{Name: "session-timeout", Value: dagengine.DefaultSessionTimeout, Usage: "consumer group session timeout: how soon a dead engine's partitions move to another engine or to its restart", Sources: envVar("session-timeout")},
			&cli.StringFlag{Name: "group-instance-id", Usage: "static group membership: a unique, stable id per engine (e.g. the pod name); a crashed engine restarted within --session-timeout gets its partitions back without a rebalance, a stop still leaves the groups (default: dynamic membership)", Sources: envVar("group-instance-id")},
			&cli.DurationFlag{Name: "redrive-after", Value: 10 * time.Second, Usage: "how long work another engine saved is left to it before this one redoes it", Sources: envVar("redrive-after")},
			&cli.BoolFlag{Name: "jobs-shared-topic", Usage: "also read DAG definitions from the shared sundial.jobs (logged as a warning; for the move to team topics only); default: the team topics sundial.jobs.<team> only", Sources: envVar("jobs-shared-topic")},
		),
		Action: runDagEngine,
	}
}

func runDagEngine(ctx context.Context, cmd *cli.Command) error {
	p, err := newProcess(ctx, cmd, "dagengine")
	if err != nil {
		return err
	}
	kopts, err := kafkaOptions(cmd)
	if err != nil {
		return err
	}
	if err := checkKafka(ctx, kopts); err != nil {
		return err
	}
	openCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	b, err := openDagBackends(openCtx, cmd, p.logger)
	if err != nil {
		return err
	}
	defer b.close()
	e, err := dagengine.New(dagengine.Config{
		Kafka: kopts, Topics: b.names,
		Group: cmd.String("group-id"), DefinitionsGroup: cmd.String("definitions-group-id"),
		SessionTimeout: cmd.Duration("session-timeout"), GroupInstanceID: cmd.String("group-instance-id"), SharedTopic: cmd.Bool("jobs-shared-topic"),
		EventEncoding: p.encoding, StatusEncoding: p.encoding,
		ClientOptions: func(name string) []kgo.Opt {
			return []kgo.Opt{p.kafkaMetrics("dagengine-" + name)}
		},
		Store: b.store, Enqueuer: b.enq, Producer: b.client, Shards: b.shards,
		SweepInterval: cmd.Duration("sweep-interval"), RedriveAfter: cmd.Duration("redrive-after"),
		Registerer: p.reg, Logger: p.logger,
	})
	if err != nil {
		return err
	}
	if err := p.check("cassandra", func(ctx context.Context) error {
		if _, err := b.store.GetClusterConfig(ctx); err != nil {
			return fmt.Errorf("cassandra: %w", err)
		}
		return nil
	}); err != nil {
		return err
	}
	return p.run(ctx, e)
}

// dagBackends are what the commands that change DAG runs need.
type dagBackends struct {
	names  topics.Names
	store  *cassandra.Store
	client *kgo.Client
	enq    *enqueue.Enqueuer
	shards int
}

func (b *dagBackends) close() {
	b.client.Close()
	_ = b.store.Close()
}

// openDagBackends opens the store, a Kafka client that can wake dispatchers
// and publish events, and an Enqueuer. A server passes its logger, and a
// store that does not answer is asked again until ctx ends
// (serverClusterConfig); a one-shot command passes nil and fails at once.
func openDagBackends(ctx context.Context, cmd *cli.Command, server *slog.Logger) (*dagBackends, error) {
	kopts, cc, bad := backendFlags(cmd)
	if err := errors.Join(bad...); err != nil {
		return nil, err
	}
	names := topics.Names{Prefix: cmd.String("topic-prefix")}
	st, err := cassandra.Open(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("cassandra: %w", err)
	}
	var cluster store.ClusterConfig
	if server != nil {
		cluster, err = serverClusterConfig(ctx, st, server)
	} else {
		cluster, err = st.GetClusterConfig(ctx)
	}
	if err != nil {
		_ = st.Close()
		return nil, fmt.Errorf("cassandra: %w", err)
	}
	cl, err := kgo.NewClient(withKafka(kopts, kgo.RecordPartitioner(enqueue.Partitioner(names, nil)))...)
	if err != nil {
		_ = st.Close()
		return nil, fmt.Errorf("kafka: %w", err)
	}
	enq, err := enqueue.New(enqueue.Config{Store: st, Client: cl, Topics: names, Shards: cluster.Shards})
	if err != nil {
		cl.Close()
		_ = st.Close()
		return nil, err
	}
	return &dagBackends{names: names, store: st, client: cl, enq: enq, shards: cluster.Shards}, nil
}

// runs returns the library that changes DAG runs, over the backends.
func (b *dagBackends) runs() (*dagengine.Runs, error) {
	return dagengine.NewRuns(dagengine.RunsConfig{Store: b.store, Enqueuer: b.enq, Producer: b.client, Topics: b.names, Shards: b.shards})
}

func dagRunsCommand() *cli.Command {
	return &cli.Command{
		Name:      "runs",
		Usage:     "list a DAG's runs, newest first, with the state of their nodes",
		ArgsUsage: "<dag-id>",
		Description: `Example:
  sundial dag runs data.daily-etl --limit 10`,
		Flags: append(cassandraStoreFlags(),
			&cli.IntFlag{Name: "limit", Value: 20, Usage: "how many runs to print", Sources: envVar("limit")},
			outputFlag(),
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			var bad []error
			id, err := oneArg(cmd, "DAG id")
			if err != nil {
				bad = append(bad, err)
			}
			form, err := outputOf(cmd)
			if err != nil {
				bad = append(bad, err)
			}
			if cmd.Int("limit") <= 0 {
				bad = append(bad, fmt.Errorf("--limit %d: must be positive", cmd.Int("limit")))
			}
			return withStore(ctx, cmd, bad, func(st *cassandra.Store) error {
				runs, err := st.ListDagRuns(ctx, id, cmd.Int("limit"))
				if err != nil {
					return err
				}
				if out := (emitter{w: cmd.Root().Writer, form: form}); out.structured() {
					return emitAll(out, dagengine.SummarizeRuns(runs), func(r dagengine.RunSummary) dagengine.RunSummary { return r })
				}
				if len(runs) == 0 {
					_, err := fmt.Fprintf(cmd.Root().Writer, "DAG %s has no runs\n", id)
					return err
				}
				return dagengine.WriteRuns(cmd.Root().Writer, runs)
			})
		},
	}
}

func dagShowCommand() *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "print one DAG run and the state of each of its nodes",
		ArgsUsage: "<dag-run-id>",
		Description: `Example:
  sundial dag show data.daily-etl@1767229200000`,
		Flags: append(cassandraStoreFlags(), outputFlag()),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			var bad []error
			id, err := oneArg(cmd, "DAG run id")
			if err != nil {
				bad = append(bad, err)
			}
			form, err := outputOf(cmd)
			if err != nil {
				bad = append(bad, err)
			}
			return withStore(ctx, cmd, bad, func(st *cassandra.Store) error {
				row, err := st.GetDagRun(ctx, id)
				if err != nil {
					return err
				}
				state, err := dagrun.Unmarshal(row.State)
				if err != nil {
					return err
				}
				if out := (emitter{w: cmd.Root().Writer, form: form}); out.structured() {
					d, err := dagengine.DetailRun(row, state, dag.Options{})
					if err != nil {
						return err
					}
					return out.emit(d)
				}
				return dagengine.WriteRun(cmd.Root().Writer, row, state, dag.Options{})
			})
		},
	}
}

func dagResumeCommand() *cli.Command {
	return &cli.Command{
		Name:      "resume",
		Usage:     "rerun the failed, cancelled and timed-out nodes of a DAG run and continue it",
		ArgsUsage: "<dag-run-id>",
		Description: `Nodes that succeeded are not run again. Each rerun node gets a new run id
(<dag run id>/<node id>#<n>), so the runners do not refuse it as a duplicate.
Its nodes are enqueued and the run continues under the running engines.

The rerun nodes run the DAG's current definition: fix the DAG, apply it, then
resume. A current definition of another shape (a node added or removed, other
parents or job, another team) or a deleted DAG is refused, naming each node
that differs, and the run is left as it was (docs/job-definition.md).

With --api-url the resume goes through the control-plane API
(DagService.ResumeDagRun), which calls the same code, checks that the
token is an admin of the run's team and records the resume in the audit
trail.

Examples:
  sundial dag resume data.daily-etl@1767229200000
  sundial dag resume --api-url http://localhost:8080 data.daily-etl@1767229200000`,
		Flags: append(append(kafkaFlags(), cassandraStoreFlags()...), apiFlags()...),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			id, err := oneArg(cmd, "DAG run id")
			if err != nil {
				return err
			}
			if api, ok, err := apiConfig(cmd); ok || err != nil {
				if err != nil {
					return err
				}
				dags := apiv1connect.NewDagServiceClient(api.client, api.url, api.options()...)
				resp, err := dags.ResumeDagRun(ctx, connectrpc.NewRequest(&apiv1.ResumeDagRunRequest{DagRunId: id}))
				if err != nil {
					return fmt.Errorf("resume %s: %w", id, err)
				}
				return writeDagRunDetail(cmd.Root().Writer, resp.Msg.GetDagRun())
			}
			b, err := openDagBackends(ctx, cmd, nil)
			if err != nil {
				return err
			}
			defer b.close()
			r, err := b.runs()
			if err != nil {
				return err
			}
			if _, err := r.Resume(ctx, id); err != nil {
				return err
			}
			row, _, err := r.Get(ctx, id)
			if err != nil {
				return err
			}
			d, err := apiserver.DagRunDetail(row)
			if err != nil {
				return err
			}
			return writeDagRunDetail(cmd.Root().Writer, d)
		},
	}
}

// writeDagRunDetail writes a DAG run as the API answers it (GetDagRun,
// ResumeDagRun): a header, then each node's state, in the order of the
// definition it follows. `dag resume` prints it whether it resumed through
// the API or with the store's credentials (apiserver.DagRunDetail), so the
// output does not depend on the path.
func writeDagRunDetail(w io.Writer, d *apiv1.DagRunDetail) error {
	var b strings.Builder
	r, spec := d.GetRun(), d.GetSpec()
	fmt.Fprintf(&b, "DAG run   %s\nDAG       %s\nOrigin    %s\nDue       %s\nStatus    %s\nNodes     %s\nEnded     %s\nResumes   %d\n\n",
		r.GetDagRunId(), r.GetDagId(), r.GetOrigin(), tsText(r.GetDueTime()), r.GetStatus(), r.GetSummary(), tsText(d.GetEndedAt()), d.GetResumes())
	jobs := map[string]string{}
	for _, n := range spec.GetNodes() {
		jobs[n.GetId()] = n.GetJobId()
		if n.GetInline() != nil {
			jobs[n.GetId()] = dag.InlineJobID(spec.GetId(), n.GetId())
		}
	}
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tJOB\tAFTER\tRUN ID\tATTEMPT\tSTARTED\tENDED\tREASON")
	for _, n := range d.GetNodes() {
		attempt := "-"
		if n.GetAttempt() > 0 {
			attempt = fmt.Sprint(n.GetAttempt())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.GetNodeId(), n.GetPhase(), cmp.Or(jobs[n.GetNodeId()], "-"),
			cmp.Or(strings.Join(n.GetParents(), ","), "-"), cmp.Or(n.GetRunId(), "-"), attempt, tsText(n.GetStartedAt()), tsText(n.GetEndedAt()),
			cmp.Or(n.GetReason(), "-"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// tsText is a time of a DAG run as `dag show` writes it, "-" for none.
func tsText(t *timestamppb.Timestamp) string {
	if t == nil {
		return "-"
	}
	return t.AsTime().UTC().Format("2006-01-02T15:04:05.000Z")
}

func dagApplyCommand() *cli.Command {
	return &cli.Command{
		Name:      "apply",
		Usage:     "produce a DAG definition (a JSON DagSpec) to sundial.jobs and print the engine's answer",
		ArgsUsage: "-f <file|-> | <file|->",
		Description: `The file is named with -f, as for jobs apply, or as the one argument. The
definition is validated first with the engine's own rules; an invalid one
is not produced. It is produced as JSON keyed by its id with the header
sundial-kind: dag, and the DAG engine's answer on sundial.jobs.status is
printed (--wait, the default).

Examples:
  sundial dag apply -f proto/sundial/v1/testdata/dagspec/nightly-etl.json
  sundial dag apply proto/sundial/v1/testdata/dagspec/nightly-etl.json`,
		Flags: append(append([]cli.Flag{
			&cli.StringFlag{Name: "file", Aliases: []string{"f"}, Usage: "the DAG definition's file, or - for standard input", Sources: envVar("file")},
		}, kafkaFlags()...), waitFlags()...),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			path, err := dagFileArg(cmd)
			if err != nil {
				return err
			}
			data, err := readDagFile(cmd, path)
			if err != nil {
				return err
			}
			spec := &sundialv1.DagSpec{}
			if err := sundialv1.Unmarshal(sundialv1.ContentTypeJSON, data, spec); err != nil {
				return err
			}
			if _, errs := dag.Compile(spec, dag.Options{}); len(errs) > 0 {
				return &dag.ValidationError{DagID: spec.GetId(), Errors: errs}
			}
			return produceDag(ctx, cmd, func(ctx context.Context, c *client.Client) (client.Receipt, error) {
				return c.ApplyDag(ctx, spec)
			})
		},
	}
}

func dagDeleteCommand() *cli.Command {
	return &cli.Command{
		Name:      "delete",
		Usage:     "delete a DAG: produce its tombstone (with the header sundial-kind: dag) to sundial.jobs",
		ArgsUsage: "<dag-id>",
		Description: `DAG runs already started go on with the definition they started with; no new
run starts.

Example:
  sundial dag delete data.daily-etl`,
		Flags: append(kafkaFlags(), waitFlags()...),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			id, err := oneArg(cmd, "DAG id")
			if err != nil {
				return err
			}
			return produceDag(ctx, cmd, func(ctx context.Context, c *client.Client) (client.Receipt, error) {
				return c.DeleteDag(ctx, id) // to --team's topic, else the team the id starts with
			})
		},
	}
}

// produceDag produces a DAG record with produce (client.Client.ApplyDag or
// DeleteDag, the one framing of DAG records) and, with --wait, prints the
// engine's answer.
func produceDag(ctx context.Context, cmd *cli.Command, produce func(context.Context, *client.Client) (client.Receipt, error)) error {
	c, kopts, err := newClient(cmd)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, cmd.Duration("timeout"))
	defer cancel()
	return guardKafka(ctx, kopts, func(ctx context.Context) error {
		r, err := produce(ctx, c)
		if err != nil {
			return err
		}
		return printDagAnswer(ctx, cmd, c, r)
	})
}

// printDagAnswer prints where r went or, with --wait, the engine's answer.
func printDagAnswer(ctx context.Context, cmd *cli.Command, c *client.Client, r client.Receipt) error {
	var b strings.Builder
	if !cmd.Bool("wait") {
		fmt.Fprintf(&b, "%s\tproduced to %s[%d]@%d\n", r.ID, r.Topic, r.Partition, r.Offset)
		_, err := io.WriteString(cmd.Root().Writer, b.String())
		return err
	}
	statuses, err := c.WaitStatus(ctx, r)
	if err != nil {
		return fmt.Errorf("is a DAG engine running? %w", err)
	}
	st := statuses[0]
	fmt.Fprintf(&b, "%s\t%s", r.ID, outcomeName(st.GetOutcome()))
	if next := st.GetNextDueTime(); next != nil {
		fmt.Fprintf(&b, "\tnext due %s", next.AsTime().Format(time.RFC3339Nano))
	}
	b.WriteString("\n")
	for _, e := range st.GetErrors() {
		fmt.Fprintf(&b, "  %s: %s\n", e.GetField(), e.GetReason())
	}
	if _, err := io.WriteString(cmd.Root().Writer, b.String()); err != nil {
		return err
	}
	if st.GetOutcome() == sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_REJECTED {
		return fmt.Errorf("DAG %q rejected", r.ID)
	}
	return nil
}

// readDagFile reads a file argument, "-" for standard input.
// dagFileArg returns the file dag apply reads: the --file flag or the one
// argument, never both.
func dagFileArg(cmd *cli.Command) (string, error) {
	flag, args := cmd.String("file"), cmd.Args().Len()
	switch {
	case flag != "" && args > 0:
		return "", fmt.Errorf("name the file once: with -f or as the argument, not both (got -f %s and %d arguments)", flag, args)
	case flag != "":
		return flag, nil
	case args == 1:
		return cmd.Args().First(), nil
	}
	return "", fmt.Errorf("--file: required: name the DAG definition's file with -f FILE (or - for standard input), got %d arguments", args)
}

func readDagFile(cmd *cli.Command, path string) ([]byte, error) {
	var (
		data []byte
		err  error
	)
	if path == "-" {
		r := cmd.Root().Reader
		if r == nil {
			r = os.Stdin
		}
		data, err = io.ReadAll(r)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return data, nil
}

func dagValidateCommand() *cli.Command {
	return &cli.Command{
		Name:      "validate",
		Usage:     "check a DAG definition file (JSON, or binary protobuf) without producing it",
		ArgsUsage: "<file|->",
		Description: `Prints every problem as field: reason, the way sundial.jobs.status would,
and exits non-zero when there is one.

Example:
  sundial dag validate nightly-etl.json`,
		Action: func(_ context.Context, cmd *cli.Command) error {
			path, err := oneArg(cmd, "file")
			if err != nil {
				return err
			}
			data, err := readDagFile(cmd, path)
			if err != nil {
				return err
			}
			ct := sundialv1.ContentTypeProtobuf
			if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
				ct = sundialv1.ContentTypeJSON
			}
			spec := &sundialv1.DagSpec{}
			if err := sundialv1.Unmarshal(ct, data, spec); err != nil {
				return err
			}
			g, errs := dag.Compile(spec, dag.Options{})
			out := cmd.Root().Writer
			if len(errs) > 0 {
				var b strings.Builder
				for _, fe := range errs {
					fmt.Fprintf(&b, "%s: %s\n", fe.Field, fe.Reason)
				}
				if _, err := io.WriteString(out, b.String()); err != nil {
					return err
				}
				return fmt.Errorf("DAG %q: %d problem(s)", spec.GetId(), len(errs))
			}
			roots := 0
			for i := range g.Len() {
				if len(g.Parents(i)) == 0 {
					roots++
				}
			}
			_, err = fmt.Fprintf(out, "DAG %s is valid: %d nodes, %d roots, policy %s\n", g.ID(), g.Len(), roots, g.Policy())
			return err
		},
	}
}
