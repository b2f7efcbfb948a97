package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os/user"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/audit"
	"github.com/sundialhq/sundial/enqueue"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/leasing"
	"github.com/sundialhq/sundial/operator"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner"
	"github.com/sundialhq/sundial/store/cassandra"
)

// The operator actions (package operator) as commands: jobs pause, resume,
// trigger and backfill, runs cancel, and apply --dry-run (jobsapply.go).

func timeoutFlag(d time.Duration) cli.Flag {
	return &cli.DurationFlag{Name: "timeout", Value: d, Usage: "give up after this long", Sources: envVar("timeout")}
}

func redisPrefixFlag() cli.Flag {
	return &cli.StringFlag{Name: "redis-key-prefix", Usage: "the runners' --redis-key-prefix", Sources: envVar("redis-key-prefix")}
}

// cliAudit records the CLI's operator actions in the audit trail, in the
// store (the API server also publishes them on sundial.audit). The CLI acts
// with the store's credentials and carries no principal, so the actor is
// the local user: "cli:<user>".
func cliAudit(st *cassandra.Store) (operator.Recorder, error) {
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	trail, err := audit.New(audit.Config{Store: st})
	if err != nil {
		return nil, err
	}
	return operator.AuditTrail{Trail: trail, Fallback: "cli:" + name}, nil
}

func jobsPauseCommand() *cli.Command  { return pauseCommand("pause", true) }
func jobsResumeCommand() *cli.Command { return pauseCommand("resume", false) }

func pauseCommand(name string, pause bool) *cli.Command {
	usage := "pause a job: its schedule fires nothing, and its pending retries, deferrals, triggers and DAG nodes are held until it is resumed"
	if !pause {
		usage = "resume a paused job: what it held fires at once, and occurrences due while it was paused follow its misfire policy"
	}
	return &cli.Command{
		Name:      name,
		Usage:     usage,
		ArgsUsage: "ID",
		Description: `Reads the definition in force, produces it to its team's topic with the
paused flag changed (as jobs apply does; a producer revision is incremented)
and waits for the registry's answer: through the control-plane API when
--api-url is set, else straight to Cassandra and Kafka.`,
		Flags: slices.Concat(kafkaFlags(), cassandraStoreFlags(), apiFlags(), []cli.Flag{timeoutFlag(30 * time.Second)}),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			id, err := oneArg(cmd, "job id")
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, cmd.Duration("timeout"))
			defer cancel()
			report := func(changed bool, status *sundialv1.JobStatus, err error) error {
				if err != nil {
					return err
				}
				out, state := cmd.Root().Writer, name+"d" // paused, resumed
				if !changed {
					fmt.Fprintf(out, "%s\talready %s; nothing produced\n", id, state)
					return nil
				}
				fmt.Fprintf(out, "%s\t%s\t%s\n", id, outcomeName(status.GetOutcome()), state)
				return nil
			}
			if ops, ok, err := apiOperations(cmd); ok || err != nil {
				if err != nil {
					return err
				}
				return report(ops.setPaused(ctx, id, pause))
			}
			c, kopts, err := newClient(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			return withStore(ctx, cmd, nil, func(st *cassandra.Store) error {
				return guardKafka(ctx, kopts, func(ctx context.Context) error {
					trail, err := cliAudit(st)
					if err != nil {
						return err
					}
					ops := operationsDirect{operator.New(operator.Config{Jobs: st, Producer: c, Audit: trail})}
					return report(ops.setPaused(ctx, id, pause))
				})
			})
		},
	}
}

func runsCancelCommand() *cli.Command {
	return &cli.Command{
		Name:      "cancel",
		Usage:     "cancel a running run: the runner executing it stops it, CANCELLED follows and no retry is scheduled",
		ArgsUsage: "RUN_ID",
		Description: `Asks Redis whether the run holds a lease; if it does, signals the runners
(the channel of the overlap policy REPLACE) and, with --wait (the default),
prints the run's terminal event. A run that holds no lease (not started,
finished, or waiting for its next attempt) is not running: the command says
so and exits non-zero. The job id is taken from the run id (JOB@millis); name
it with --job for a DAG node's run. Through the control-plane API when
--api-url is set, else straight to Redis and Kafka.`,
		Flags: slices.Concat(kafkaFlags(), redisFlags(), apiFlags(), []cli.Flag{
			redisPrefixFlag(),
			&cli.StringFlag{Name: "job", Usage: "the run's job id (default: from the run id)", Sources: envVar("job")},
			&cli.BoolFlag{Name: "wait", Value: true, Usage: "wait for the run's terminal event", Sources: envVar("wait")},
			timeoutFlag(time.Minute),
		}),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if ops, ok, err := apiOperations(cmd); ok || err != nil {
				if err != nil {
					return err
				}
				return signalRunThrough(ctx, cmd, "cancel", "cancel signalled", func(ctx context.Context, job, runID string, wait bool) (*sundialv1.RunEvent, error) {
					return ops.cancel(ctx, job, runID, wait)
				})
			}
			return signalRun(ctx, cmd, "cancel", "cancel signalled", func(ctx context.Context, op *operator.Operator, job, runID string, wait bool) (*sundialv1.RunEvent, error) {
				return operationsDirect{op}.cancel(ctx, job, runID, wait)
			})
		},
	}
}

func jobsBackfillCommand() *cli.Command {
	return &cli.Command{
		Name:      "backfill",
		Usage:     "run a job's occurrences of a past time range, at most --max-concurrent at once",
		ArgsUsage: "ID",
		Description: `Computes the occurrences of the job's schedule (the definition in force) due
at or after --from and before --to, prints how many runs it will create, and
(unless --dry-run) enqueues them as triggers with the occurrences' own run ids
(JOB@millis), so repeating the command creates no second run: occurrences
that already ran are skipped. It waits for each run's end before enqueuing
more than --max-concurrent, and returns when all have ended.

Examples:
  sundial jobs backfill billing.hourly --from 2026-11-01T00:00:00Z --to 2026-11-02T00:00:00Z --dry-run
  sundial jobs backfill billing.hourly --from 2026-11-01T00:00:00Z --to 2026-11-08T00:00:00Z --policy one-per-window --window 24h --max-concurrent 4`,
		Flags: slices.Concat(kafkaFlags(), cassandraStoreFlags(), redisFlags(), []cli.Flag{
			redisPrefixFlag(),
			&cli.TimestampFlag{Name: "from", Usage: "start of the range, RFC 3339, included", Config: cli.TimestampConfig{Layouts: []string{time.RFC3339Nano}}, Sources: envVar("from")},
			&cli.TimestampFlag{Name: "to", Usage: "end of the range, RFC 3339, excluded", Config: cli.TimestampConfig{Layouts: []string{time.RFC3339Nano}}, Sources: envVar("to")},
			&cli.StringFlag{Name: "policy", Value: "every", Usage: "every (each occurrence) or one-per-window (the latest of each --window)", Sources: envVar("policy")},
			&cli.DurationFlag{Name: "window", Usage: "the window of --policy one-per-window", Sources: envVar("window")},
			&cli.IntFlag{Name: "max-concurrent", Value: 10, Usage: "most runs of the backfill pending at once", Sources: envVar("max-concurrent")},
			&cli.BoolFlag{Name: "dry-run", Usage: "print the count and the first and last occurrence, enqueue nothing", Sources: envVar("dry-run")},
			timeoutFlag(time.Hour),
		}),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			id, err := oneArg(cmd, "job id")
			if err != nil {
				return err
			}
			opts := operator.BackfillOptions{From: cmd.Timestamp("from"), To: cmd.Timestamp("to"), Window: cmd.Duration("window"),
				MaxConcurrent: cmd.Int("max-concurrent"), DryRun: cmd.Bool("dry-run")}
			var bad []error
			switch cmd.String("policy") {
			case "every":
			case "one-per-window":
				opts.Policy = operator.BackfillOnePerWindow
			default:
				bad = append(bad, fmt.Errorf("--policy %q: want every or one-per-window", cmd.String("policy")))
			}
			if err := opts.Validate(); err != nil {
				bad = append(bad, err)
			}
			ctx, cancel := context.WithTimeout(ctx, cmd.Duration("timeout"))
			defer cancel()
			out := cmd.Root().Writer
			return withStore(ctx, cmd, bad, func(st *cassandra.Store) error {
				trail, err := cliAudit(st)
				if err != nil {
					return err
				}
				cfg := operator.Config{Jobs: st, Audit: trail}
				if !opts.DryRun {
					kopts, rdb, err := kafkaAndRedis(cmd)
					if err != nil {
						return err
					}
					defer func() { _ = rdb.Close() }()
					leases, err := leasing.New(leasing.Config{Client: rdb, KeyPrefix: cmd.String("redis-key-prefix") + leasing.DefaultKeyPrefix})
					if err != nil {
						return err
					}
					enq, closeEnq, err := newEnqueuer(ctx, cmd, st, kopts)
					if err != nil {
						return err
					}
					defer closeEnq()
					cfg.Leases, cfg.Enqueuer, cfg.Kafka, cfg.Topics = leases, enq, kopts, topics.Names{Prefix: cmd.String("topic-prefix")}
				}
				done := 0
				opts.Progress = func(*sundialv1.RunEvent) {
					if done++; done%100 == 0 {
						fmt.Fprintf(cmd.Root().ErrWriter, "%d runs ended\n", done)
					}
				}
				res, err := operator.New(cfg).Backfill(ctx, id, opts)
				printBackfill(out, id, opts, res)
				return err
			})
		},
	}
}

func printBackfill(w io.Writer, id string, opts operator.BackfillOptions, res operator.BackfillResult) {
	n := len(res.Occurrences)
	fmt.Fprintf(w, "%s\t%d runs from %s to %s", id, n, opts.From.UTC().Format(time.RFC3339), opts.To.UTC().Format(time.RFC3339))
	if n > 0 {
		fmt.Fprintf(w, " (first %s, last %s)", res.Occurrences[0].Format(time.RFC3339Nano), res.Occurrences[n-1].Format(time.RFC3339Nano))
	}
	fmt.Fprintln(w)
	if opts.DryRun {
		fmt.Fprintln(w, "dry run: nothing enqueued")
		return
	}
	fmt.Fprintf(w, "enqueued %d, already done %d", res.Enqueued, res.AlreadyDone)
	for st, k := range res.Finished {
		fmt.Fprintf(w, ", %s %d", stateName(st), k)
	}
	fmt.Fprintln(w)
}

func stateName(s sundialv1.RunState) string { return strings.TrimPrefix(s.String(), "RUN_STATE_") }

// eventLine is one line for a run's terminal event.
func eventLine(ev *sundialv1.RunEvent) string {
	line := fmt.Sprintf("%s\t%s\tattempt %d", ev.GetRunId(), stateName(ev.GetState()), ev.GetAttempt())
	if r := ev.GetReason(); r != "" {
		line += "\treason " + r
	}
	if e := ev.GetError(); e != nil {
		line += fmt.Sprintf("\terror %s: %s", e.GetCode(), e.GetMessage())
	}
	return line
}

// newEnqueuer returns an enqueuer over st producing wake-ups with kopts,
// and the function that closes its client.
func newEnqueuer(ctx context.Context, cmd *cli.Command, st *cassandra.Store, kopts []kgo.Opt) (*enqueue.Enqueuer, func(), error) {
	cluster, err := st.GetClusterConfig(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("cassandra: %w", err)
	}
	names := topics.Names{Prefix: cmd.String("topic-prefix")}
	cl, err := kgo.NewClient(withKafka(kopts, kgo.RecordPartitioner(enqueue.Partitioner(names, nil)))...)
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: %w", err)
	}
	enq, err := enqueue.New(enqueue.Config{Store: st, Client: cl, Topics: names, Shards: cluster.Shards})
	if err != nil {
		cl.Close()
		return nil, nil, err
	}
	return enq, cl.Close, nil
}

// dryRunFires is how many next fire times apply --dry-run prints.
const dryRunFires = 5

// applyDryRun is `jobs apply --dry-run`: what applying the definitions at
// path would change, computed against the stored definitions; nothing is
// produced.
func applyDryRun(ctx context.Context, cmd *cli.Command, path string) error {
	ctx, cancel := context.WithTimeout(ctx, cmd.Duration("timeout"))
	defer cancel()
	a := &applyRun{cmd: cmd, out: cmd.Root().Writer, errOut: cmd.Root().ErrWriter, start: time.Now()}
	specs := slices.Collect(a.specs(ctx, path))
	return withStore(ctx, cmd, nil, func(st *cassandra.Store) error {
		cluster, err := st.GetClusterConfig(ctx)
		if err != nil {
			return fmt.Errorf("cassandra: %w", err)
		}
		plans, err := operator.New(operator.Config{Jobs: st, Shards: cluster.Shards}).PlanApply(ctx, specs, dryRunFires)
		if err != nil {
			return err
		}
		w := cmd.Root().Writer
		invalid := len(a.unreadable)
		for _, u := range a.unreadable {
			fmt.Fprintf(w, "unreadable\t%s\n", u)
		}
		for _, p := range plans {
			invalid += printPlan(w, p)
		}
		fmt.Fprintf(w, "dry run: %d definitions, nothing produced\n", len(plans))
		if invalid > 0 {
			return fmt.Errorf("%d definitions would be rejected", invalid)
		}
		return nil
	})
}

// printPlan prints one definition's plan and returns 1 when it is invalid.
func printPlan(w io.Writer, p operator.DefinitionPlan) int {
	if len(p.Errors) > 0 {
		fmt.Fprintf(w, "%s\tREJECTED\n", p.JobID)
		for _, e := range p.Errors {
			fmt.Fprintf(w, "  %s: %s\n", e.Field, e.Reason)
		}
		return 1
	}
	switch {
	case p.Created:
		fmt.Fprintf(w, "%s\twould be CREATED\n", p.JobID)
	case len(p.Changes) == 0:
		fmt.Fprintf(w, "%s\tUNCHANGED\n", p.JobID)
	default:
		fmt.Fprintf(w, "%s\twould be UPDATED\n", p.JobID)
	}
	for _, c := range p.Changes {
		switch {
		case c.Before == "":
			fmt.Fprintf(w, "  + %s: %s\n", c.Field, c.After)
		case c.After == "":
			fmt.Fprintf(w, "  - %s: %s\n", c.Field, c.Before)
		default:
			fmt.Fprintf(w, "  ~ %s: %s -> %s\n", c.Field, c.Before, c.After)
		}
	}
	if len(p.NextFires) > 0 {
		fires := make([]string, len(p.NextFires))
		for i, t := range p.NextFires {
			fires[i] = t.Format(time.RFC3339)
		}
		fmt.Fprintf(w, "  next fires: %s\n", strings.Join(fires, ", "))
	} else {
		fmt.Fprintf(w, "  next fires: none\n")
	}
	buckets := slices.SortedFunc(maps.Keys(p.Load), func(a, b time.Time) int { return a.Compare(b) })
	total, busiest := 0, 0
	for _, b := range buckets {
		total += p.Load[b]
		busiest = max(busiest, p.Load[b])
	}
	bound := ""
	if p.LoadLowerBound {
		bound = " at least (a BROADCAST job counted as one run: its pool's live members are not known here)"
	}
	fmt.Fprintf(w, "  load in the next hour on shard %d: %+d runs%s over %d minute buckets (busiest %+d; %d runs per occurrence)\n",
		p.Shard, total, bound, len(buckets), busiest, p.RunsPerOccurrence)
	for _, b := range buckets {
		fmt.Fprintf(w, "    %s  %+d\n", b.Format("15:04"), p.Load[b])
	}
	return 0
}

// signalRun is the one body of the commands that signal a running run
// through its runner straight on the backends (runs cancel, runs suspend):
// it opens Redis and the operator and hands them to send through
// signalRunThrough. verb names the action in the answer to a run no runner
// holds.
func signalRun(ctx context.Context, cmd *cli.Command, verb, done string,
	send func(ctx context.Context, op *operator.Operator, job, runID string, wait bool) (*sundialv1.RunEvent, error)) error {
	if _, err := oneArg(cmd, "run id"); err != nil {
		return err
	}
	kopts, rdb, err := kafkaAndRedis(cmd)
	if err != nil {
		return err
	}
	defer func() { _ = rdb.Close() }()
	prefix := cmd.String("redis-key-prefix")
	leases, err := leasing.New(leasing.Config{Client: rdb, KeyPrefix: prefix + leasing.DefaultKeyPrefix})
	if err != nil {
		return err
	}
	if err := checkRedis(ctx, rdb); err != nil {
		return err
	}
	op := operator.New(operator.Config{Leases: leases, Redis: rdb, RunnerKeyPrefix: prefix + runner.DefaultKeyPrefix,
		Kafka: kopts, Topics: topics.Names{Prefix: cmd.String("topic-prefix")}})
	return signalRunThrough(ctx, cmd, verb, done, func(ctx context.Context, job, runID string, wait bool) (*sundialv1.RunEvent, error) {
		return send(ctx, op, job, runID, wait)
	})
}

// signalRunThrough finds the run's job (--job, else from the run id),
// sends the signal with send within --timeout, and prints
// "<run id>\t<done>" and the event send waited for.
func signalRunThrough(ctx context.Context, cmd *cli.Command, verb, done string,
	send func(ctx context.Context, job, runID string, wait bool) (*sundialv1.RunEvent, error)) error {
	runID, err := oneArg(cmd, "run id")
	if err != nil {
		return err
	}
	job := cmd.String("job")
	if job == "" {
		if job = operator.JobOfRun(runID); job == "" {
			return fmt.Errorf("run id %q: not JOB@millis; name its job with --job", runID)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, cmd.Duration("timeout"))
	defer cancel()
	ev, err := send(ctx, job, runID, cmd.Bool("wait"))
	if errors.Is(err, operator.ErrNotRunning) {
		return fmt.Errorf("run %s is not running (no runner holds its lease): nothing to %s", runID, verb)
	}
	if err != nil {
		return err
	}
	out := cmd.Root().Writer
	fmt.Fprintf(out, "%s\t%s\n", runID, done)
	if ev != nil {
		fmt.Fprintln(out, eventLine(ev))
	}
	return nil
}

// withRunBackends opens what an action on a run's next attempt needs
// straight on the backends (runs retry, runs resume): the store, Redis
// (checked) and an Enqueuer, and closes them after use. use gets the store
// and the operator's configuration over Redis and the Enqueuer, to which
// it adds what its action reads from the store.
func withRunBackends(ctx context.Context, cmd *cli.Command, use func(st *cassandra.Store, cfg operator.Config) error) error {
	return withStore(ctx, cmd, nil, func(st *cassandra.Store) error {
		kopts, rdb, err := kafkaAndRedis(cmd)
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
		return use(st, operator.Config{Enqueuer: enq, Redis: rdb, RunnerKeyPrefix: cmd.String("redis-key-prefix") + runner.DefaultKeyPrefix})
	})
}
