package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/bench"
	"github.com/sundialhq/sundial/internal/telemetry"
	"github.com/sundialhq/sundial/loadgen"
)

func benchCommand() *cli.Command {
	cmd := &cli.Command{
		Name:  "bench",
		Usage: "run a capacity scenario (" + strings.Join(bench.Scenarios, ", ") + ") on the real stack and write a report",
		Description: `Measures the backend baselines K, R and C in the same run, then runs the
scenario's workload through the pipeline against the real Kafka, Cassandra and
Redis, in a namespace of its own (topic prefix, keyspace, Redis key prefix)
that is deleted afterwards. The report (report.json, summary.md and PNG
plots) goes to bench/results/<timestamp>-<scenario>/. See bench/README.md.
"sundial bench SCENARIO --help" lists the flags.

Examples, against the local stack:
  make bench SCENARIO=steady
  source <(deploy/local/stack.sh env) && sundial bench steady --jobs 1000000 --rate 2000 --duration 3m
  sundial bench herd --jobs 100000
  sundial bench crash
  sundial bench peer --jobs 100000 --rate 1000
  sundial bench steady --rate 1000 --noisy        # a CPU hog on one core beside the pipeline
  sundial bench steady --rate 1000 --api-watch    # the API streaming every run to a watch beside the pipeline
  sundial bench capacity                          # the highest rate with trigger p95 ≤ 1s, as a fraction of L
  sundial bench chaos --rate 1000 --duration 10m   # kills processes and backends of the stack
  sundial bench workers --jobs 30000 --rate 500    # the stock runner, then SDK workers through the gateway`,
		Action: func(_ context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 0 {
				return fmt.Errorf("bench: unknown scenario %q: want one of %s", cmd.Args().First(), strings.Join(bench.Scenarios, ", "))
			}
			return cli.ShowSubcommandHelp(cmd)
		},
	}
	for _, sc := range bench.Scenarios {
		cmd.Commands = append(cmd.Commands, benchScenarioCommand(sc))
	}
	cmd.Commands = append(cmd.Commands, benchCompareCommand(), &cli.Command{
		Name:   "hog",
		Usage:  "keep one core busy until stdin closes (the CPU hog of --noisy)",
		Hidden: true,
		Action: func(ctx context.Context, _ *cli.Command) error { return bench.RunHog(ctx, os.Stdin) },
	}, &cli.Command{
		Name:  "worker",
		Usage: "a team's SDK worker serving the workers scenario's handler (its settings: --api-url, --api-token, ... or their SUNDIAL_* variables; --effect-url)",
		// The worker's own settings (package worker's Flags) are parsed by
		// bench.RunWorker, as a team's worker program parses them.
		SkipFlagParsing: true,
		Hidden:          true,
		Action: func(ctx context.Context, cmd *cli.Command) error {
			args := cmd.Args().Slice()
			if slices.ContainsFunc(args, func(a string) bool { return a == "-h" || a == "--help" || a == "-help" }) {
				// The command's help, then the worker's own flags.
				if err := cli.ShowSubcommandHelp(cmd); err != nil {
					return err
				}
				return bench.RunWorker(ctx, []string{"--help"}, cmd.Root().Writer)
			}
			return bench.RunWorker(ctx, args, cmd.Root().ErrWriter)
		},
	})
	return cmd
}

func benchCompareCommand() *cli.Command {
	return &cli.Command{
		Name:      "compare",
		Usage:     "print the key figures of two results folders side by side, with B / A",
		ArgsUsage: "A_DIR B_DIR",
		Description: `Reads report.json of two runs of the same workload, A the reference and B
the run compared with it, and prints the Sundial system's sustained rate,
trigger p50/p95/p99, dispatch p95, lost runs and duplicates of each, B / A and
by how much B is worse than A. For a same-run comparison, run the two back to
back on the same stack, for example without and with --api-watch:

  sundial bench steady --rate 1000 --duration 3m
  sundial bench steady --rate 1000 --duration 3m --api-watch
  sundial bench compare bench/results/<first> bench/results/<second>`,
		Action: func(_ context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() != 2 {
				return fmt.Errorf("bench compare: want two results folders A_DIR B_DIR, got %d arguments", cmd.Args().Len())
			}
			dirA, dirB := cmd.Args().Get(0), cmd.Args().Get(1)
			a, errA := bench.ReadReport(dirA)
			b, errB := bench.ReadReport(dirB)
			if err := errors.Join(errA, errB); err != nil {
				return fmt.Errorf("bench compare: %w", err)
			}
			bench.Compare(cmd.Root().Writer, dirA, a, dirB, b)
			return nil
		},
	}
}

// benchUsage is the one-line description of each scenario.
var benchUsage = map[string]string{
	"steady":   "N recurring jobs at a planned rate for a window (default 1,000,000 jobs at 2,000/s for 3m)",
	"herd":     "N one-off jobs due in the same second (default 100,000)",
	"crash":    "a steady load on subprocesses while a runner and a dispatcher are killed and restarted",
	"peer":     "the steady workload on Sundial, then on asynq over the same Redis",
	"chaos":    "a steady load and DAGs while processes and backends are killed (a stack of its own)",
	"capacity": "find the highest rate whose trigger p95 stays ≤ 1s, as a fraction of L",
	"workers":  "a handler workload run by the stock runner, then by SDK worker processes through the worker gateway",
}

func benchScenarioCommand(scenario string) *cli.Command {
	return &cli.Command{
		Name:  scenario,
		Usage: benchUsage[scenario],
		Flags: benchFlags(),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() != 0 {
				return fmt.Errorf("bench %s: unexpected arguments %v: every setting is a flag", scenario, cmd.Args().Slice())
			}
			mix, err := loadgen.ParseMix(cmd.String("mix"))
			if err != nil {
				return fmt.Errorf("--mix: %w", err)
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(cmd.String("log-level"))); err != nil {
				return fmt.Errorf("--log-level %q: want debug, info, warn or error", cmd.String("log-level"))
			}
			// The hog of --noisy is this binary's hidden "bench hog".
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("bench: find this binary for the CPU hog: %w", err)
			}
			b := &bench.Bench{
				Config: bench.Config{
					Scenario: scenario, Jobs: cmd.Int("jobs"), Rate: cmd.Float("rate"), Duration: cmd.Duration("duration"),
					Drain: cmd.Duration("drain"), Lead: cmd.Duration("lead"), Mix: mix, Shards: cmd.Int("shards"),
					Dispatchers: cmd.Int("dispatchers"), Runners: cmd.Int("runners"), RunnerConcurrency: cmd.Int("runner-concurrency"), MemoryLimitMiB: cmd.Int("memory-limit-mib"),
					RunnerHTTPIdleConns: cmd.Int("runner-http-idle-conns"), RegistryConcurrency: cmd.Int("registry-concurrency"), History: cmd.Bool("history"), Processes: cmd.Bool("processes"), DispatcherProcess: cmd.Bool("dispatcher-process"),
					Binary: cmd.String("binary"), Target: cmd.String("target"), PayloadBytes: cmd.Int("payload-bytes"), Splay: cmd.Duration("splay"), EffectDuration: cmd.Duration("effect-duration"),
					BaselineDuration: cmd.Duration("baseline-duration"), ProfileSpan: cmd.Duration("profile-span"), CrashKill: cmd.String("crash-kill"),
					CrashAfter: cmd.Duration("crash-after"), CrashDown: cmd.Duration("crash-down"),
					DagEngines: cmd.Int("dag-engines"), Dags: cmd.Int("dags"), DagNodes: cmd.Int("dag-nodes"), DagEvery: cmd.Duration("dag-every"),
					ChaosEvery: cmd.Duration("chaos-every"), ChaosProcessDown: cmd.Duration("chaos-process-down"), ChaosBackendDown: cmd.Duration("chaos-backend-down"),
					ChaosBackends: cmd.StringSlice("chaos-backends"), ChaosSeed: uint64(cmd.Uint("chaos-seed")), StackScript: cmd.String("stack-script"),
					AsynqDelayedCheck: cmd.Duration("asynq-delayed-check"), AsynqConcurrency: cmd.Int("asynq-concurrency"),
					Workers: cmd.Int("workers"), WorkerSlots: cmd.Int("worker-slots"),
					MaxRate: cmd.Float("max-rate"), CapacitySteps: cmd.Int("capacity-steps"), Noisy: cmd.Bool("noisy"), APIWatch: cmd.Bool("api-watch"),
					Keep: cmd.Bool("keep"), ResultsDir: cmd.String("results-dir"),
				},
				Backends: bench.Backends{Brokers: cmd.StringSlice("kafka-brokers"), CassandraHosts: cmd.StringSlice("cassandra-hosts"),
					RedisAddr: cmd.String("redis-addr"), PostgresURL: cmd.String("postgres-url")},
				Progress:   cmd.Root().Writer,
				CPUProfile: cmd.String("cpu-profile"),
				HogCommand: []string{exe, "bench", "hog"},
				APICommand: []string{exe, "api"},
				Logger:     slog.New(slog.NewTextHandler(cmd.Root().ErrWriter, &slog.HandlerOptions{Level: level})),
			}
			if addr := cmd.String("pprof-addr"); addr != "" {
				srv, err := telemetry.NewPprofServer(telemetry.PprofConfig{Addr: addr})
				if err != nil {
					return fmt.Errorf("--pprof-addr: %w", err)
				}
				if err := srv.Start(ctx); err != nil {
					return fmt.Errorf("--pprof-addr: %w", err)
				}
				defer srv.Stop()
			}
			dir, rep, err := b.Run(ctx)
			if err != nil {
				return err
			}
			rep.Markdown(cmd.Root().Writer)
			_, _ = fmt.Fprintf(cmd.Root().Writer, "\nreport written to %s\n", dir)
			return nil
		},
	}
}

// benchFlags are the flags of every scenario; a flag that does not apply to
// a scenario says so in its usage. Flags whose default depends on the
// scenario hide the zero value and name the defaults in the usage.
func benchFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "kafka-brokers", Usage: "Kafka seed brokers, host:port", Sources: envVar("kafka-brokers")},
		&cli.StringSliceFlag{Name: "cassandra-hosts", Usage: "Cassandra contact points, host or host:port", Sources: envVar("cassandra-hosts")},
		&cli.StringFlag{Name: "redis-addr", Usage: "Redis address, host:port", Sources: envVar("redis-addr")},
		&cli.StringFlag{Name: "postgres-url", Usage: "peer: the PostgreSQL of the River peer, postgres://user@host:port/db (deploy/local/postgres.sh env); empty: no River peer", Sources: envVar("postgres-url")},
		&cli.IntFlag{Name: "jobs", HideDefault: true, Usage: "jobs (steady, crash, peer) or runs due in the same second (herd); default per scenario; capacity: not used, each step defines rate × 5s interval jobs", Sources: envVar("jobs")},
		&cli.FloatFlag{Name: "rate", HideDefault: true, Usage: "planned triggers/s (capacity: of the first step); default per scenario", Sources: envVar("rate")},
		&cli.DurationFlag{Name: "duration", HideDefault: true, Usage: "length of the measured window (capacity: of each step); default per scenario", Sources: envVar("duration")},
		&cli.DurationFlag{Name: "drain", HideDefault: true, Usage: "how long after the window runs due in it may still start before they count as lost (default 1m; herd 10m, chaos 5m, capacity 15s)", Sources: envVar("drain")},
		&cli.DurationFlag{Name: "lead", HideDefault: true, Usage: "herd: how far ahead the herd is due; others: wait between registration and the window (default 45s; herd 2m + 1ms per job, capacity 10s)", Sources: envVar("lead")},
		&cli.StringFlag{Name: "mix", Value: "interval=0.85,cron=0.10,at=0.05", Usage: "shares of schedule kinds (capacity: interval jobs only)", Sources: envVar("mix")},
		&cli.IntFlag{Name: "shards", Value: 128, Usage: "shard count S of the bench's cluster", Sources: envVar("shards")},
		&cli.IntFlag{Name: "dispatchers", HideDefault: true, Usage: "dispatchers (default 1; crash 2)", Sources: envVar("dispatchers")},
		&cli.IntFlag{Name: "runners", HideDefault: true, Usage: "runners (default 1; crash 2)", Sources: envVar("runners")},
		&cli.IntFlag{Name: "runner-concurrency", HideDefault: true, Usage: "workers per runner (default: the runner's)", Sources: envVar("runner-concurrency")},
		&cli.IntFlag{Name: "registry-concurrency", HideDefault: true, Usage: "jobs the registry processes at once (default: the registry's)", Sources: envVar("registry-concurrency")},
		&cli.IntFlag{Name: "runner-http-idle-conns", HideDefault: true, Usage: "in-process runners: idle HTTP connections per host (0: the runner's default client)", Sources: envVar("runner-http-idle-conns")},
		&cli.BoolFlag{Name: "history", Value: true, Usage: "run the history writers, as 'sundial runner' does", Sources: envVar("history")},
		&cli.BoolFlag{Name: "processes", Usage: "run dispatchers and runners as subprocesses (always for crash)", Sources: envVar("processes")},
		&cli.BoolFlag{Name: "dispatcher-process", Value: true, Usage: "run the dispatchers as subprocesses (registry and runners in the bench process) and report the first one's memory; on by default, =false runs them in the bench process", Sources: envVar("dispatcher-process")},
		&cli.StringFlag{Name: "binary", HideDefault: true, Usage: "sundial binary for the subprocesses (default: go build ./cmd/sundial)", Sources: envVar("binary")},
		&cli.StringFlag{Name: "target", Value: "http", Usage: "http (the counting downstream) or noop (in-process handler, no effects counted)", Sources: envVar("target")},
		&cli.IntFlag{Name: "payload-bytes", Value: 64, Usage: "payload of each job", Sources: envVar("payload-bytes")},
		&cli.DurationFlag{Name: "splay", HideDefault: true, Usage: "herd: spread the herd's runs over this window after its instant (the jobs' splay; default none)", Sources: envVar("splay")},
		&cli.DurationFlag{Name: "effect-duration", HideDefault: true, Usage: "how long the counting downstream takes to apply one effect (default 10ms)", Sources: envVar("effect-duration")},
		&cli.DurationFlag{Name: "baseline-duration", HideDefault: true, Usage: "how long each of K, R and C is measured (default 10s)", Sources: envVar("baseline-duration")},
		&cli.StringFlag{Name: "crash-kill", HideDefault: true, Usage: "crash: runner, dispatcher or both (default both)", Sources: envVar("crash-kill")},
		&cli.DurationFlag{Name: "crash-after", HideDefault: true, Usage: "crash: kill this long into the window (default a third of it)", Sources: envVar("crash-after")},
		&cli.DurationFlag{Name: "crash-down", HideDefault: true, Usage: "crash: how long the killed process stays down (default 5s)", Sources: envVar("crash-down")},
		&cli.IntFlag{Name: "dag-engines", HideDefault: true, Usage: "chaos: 'sundial dag engine' subprocesses (default 2)", Sources: envVar("dag-engines")},
		&cli.IntFlag{Name: "dags", HideDefault: true, Usage: "chaos: DAGs running throughout (default 20)", Sources: envVar("dags")},
		&cli.IntFlag{Name: "dag-nodes", HideDefault: true, Usage: "chaos: nodes in each DAG's chain (default 3)", Sources: envVar("dag-nodes")},
		&cli.DurationFlag{Name: "dag-every", HideDefault: true, Usage: "chaos: how often each DAG fires (default 10s)", Sources: envVar("dag-every")},
		&cli.DurationFlag{Name: "chaos-every", HideDefault: true, Usage: "chaos: interval between two process kills (default 30s)", Sources: envVar("chaos-every")},
		&cli.DurationFlag{Name: "chaos-process-down", HideDefault: true, Usage: "chaos: how long a killed process stays down (default 2s)", Sources: envVar("chaos-process-down")},
		&cli.DurationFlag{Name: "chaos-backend-down", HideDefault: true, Usage: "chaos: how long a killed backend stays down before its restart (default 5s)", Sources: envVar("chaos-backend-down")},
		&cli.StringSliceFlag{Name: "chaos-backends", HideDefault: true, Usage: "chaos: backends killed once each, in order (default redis,kafka,cassandra; none: no backend)", Sources: envVar("chaos-backends")},
		&cli.UintFlag{Name: "chaos-seed", HideDefault: true, Usage: "chaos: seed of the choice of victims (default: from the clock; the report names it)", Sources: envVar("chaos-seed")},
		&cli.StringFlag{Name: "stack-script", HideDefault: true, Usage: "chaos: the stack.sh of the stack whose backends are killed and restarted; the run refuses a stack it does not answer for (default deploy/local/stack.sh)", Sources: envVar("stack-script")},
		&cli.DurationFlag{Name: "asynq-delayed-check", HideDefault: true, Usage: "peer: asynq's DelayedTaskCheckInterval (default asynq's 5s)", Sources: envVar("asynq-delayed-check")},
		&cli.IntFlag{Name: "asynq-concurrency", HideDefault: true, Usage: "peer: asynq workers (default: runners × runner concurrency)", Sources: envVar("asynq-concurrency")},
		&cli.IntFlag{Name: "workers", HideDefault: true, Usage: "workers: SDK worker processes of the second system (default 2)", Sources: envVar("workers")},
		&cli.IntFlag{Name: "worker-slots", HideDefault: true, Usage: "workers: slots (Concurrency) of each SDK worker (default: the stock runners' workers shared among them)", Sources: envVar("worker-slots")},
		&cli.FloatFlag{Name: "max-rate", HideDefault: true, Usage: "capacity: the highest rate a step offers (default L, measured in the run)", Sources: envVar("max-rate")},
		&cli.IntFlag{Name: "capacity-steps", HideDefault: true, Usage: "capacity: the most steps of the search (default 10)", Sources: envVar("capacity-steps")},
		&cli.BoolFlag{Name: "noisy", Usage: "run a CPU hog on one core beside the pipeline (a child process; the report names it)", Sources: envVar("noisy")},
		&cli.BoolFlag{Name: "api-watch", Usage: "run `sundial api` as a child process, with a client in the bench watching every run (WatchRuns) beside the pipeline; the report counts the messages", Sources: envVar("api-watch")},
		&cli.BoolFlag{Name: "keep", Usage: "keep the namespace (topics, keyspace, Redis keys) afterwards", Sources: envVar("keep")},
		&cli.StringFlag{Name: "results-dir", Value: "bench/results", Usage: "where the results folder is written", Sources: envVar("results-dir")},
		&cli.IntFlag{Name: "memory-limit-mib", HideDefault: true, Usage: "--memory-limit-mib of the dispatcher and runner subprocesses (default: none)", Sources: envVar("memory-limit-mib")},
		&cli.StringFlag{Name: "pprof-addr", Usage: "serve net/http/pprof of the bench process (and an in-process pipeline) on this address, a loopback one (host:port) since it exposes internals; the subprocesses serve theirs on loopback ports the bench picks", Sources: envVar("pprof-addr")},
		&cli.DurationFlag{Name: "profile-span", HideDefault: true, Usage: "length of the CPU profiles taken of the bench process and of each subprocess in the middle of the measured window, saved under profiles/ in the results folder (default 30s; the whole window when it is shorter)", Sources: envVar("profile-span")},
		&cli.StringFlag{Name: "cpu-profile", Usage: "write a CPU profile of the bench process over the whole measured window to this file (it then stands for the bench process's profile of the window under profiles/)", Sources: envVar("cpu-profile")},
		&cli.StringFlag{Name: "log-level", Value: "warn", Usage: "log level of the pipeline's components", Sources: envVar("log-level")},
	}
}
