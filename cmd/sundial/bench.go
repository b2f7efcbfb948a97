package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/bench"
	"github.com/sundialhq/sundial/loadgen"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:      "bench",
		Usage:     "run a capacity scenario (steady, herd, crash, peer, chaos) on the real stack and write a report",
		ArgsUsage: "<" + strings.Join(bench.Scenarios, "|") + ">",
		Description: `Measures the backend baselines K, R and C in the same run, then runs the
scenario's workload through the pipeline against the real Kafka, Cassandra and
Redis, in a namespace of its own (topic prefix, keyspace, Redis key prefix)
that is deleted afterwards. The report (report.json, summary.md and two PNG
plots) goes to bench/results/<timestamp>-<scenario>/. See bench/README.md.

Examples, against the local stack:
  make bench SCENARIO=steady
  source <(deploy/local/stack.sh env) && sundial bench steady --jobs 1000000 --rate 2000 --duration 3m
  sundial bench herd --jobs 100000
  sundial bench crash
  sundial bench peer --jobs 100000 --rate 1000
  sundial bench chaos --rate 1000 --duration 10m   # kills processes and backends of the stack`,
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "kafka-brokers", Usage: "Kafka seed brokers, host:port", Sources: envVar("kafka-brokers")},
			&cli.StringSliceFlag{Name: "cassandra-hosts", Usage: "Cassandra contact points, host or host:port", Sources: envVar("cassandra-hosts")},
			&cli.StringFlag{Name: "redis-addr", Usage: "Redis address, host:port", Sources: envVar("redis-addr")},
			&cli.IntFlag{Name: "jobs", Usage: "jobs (steady, crash, peer) or runs due in the same second (herd); default per scenario", Sources: envVar("jobs")},
			&cli.FloatFlag{Name: "rate", Usage: "planned triggers/s; default per scenario", Sources: envVar("rate")},
			&cli.DurationFlag{Name: "duration", Usage: "length of the measured window; default per scenario", Sources: envVar("duration")},
			&cli.DurationFlag{Name: "drain", Usage: "how long after the window runs due in it may still start before they count as lost", Sources: envVar("drain")},
			&cli.DurationFlag{Name: "lead", Usage: "herd: how far ahead the herd is due; others: wait between registration and the window", Sources: envVar("lead")},
			&cli.StringFlag{Name: "mix", Value: "interval=0.85,cron=0.10,at=0.05", Usage: "shares of schedule kinds", Sources: envVar("mix")},
			&cli.IntFlag{Name: "shards", Value: 128, Usage: "shard count S of the bench's cluster", Sources: envVar("shards")},
			&cli.IntFlag{Name: "dispatchers", Usage: "dispatchers (default 1; crash 2)", Sources: envVar("dispatchers")},
			&cli.IntFlag{Name: "runners", Usage: "runners (default 1; crash 2)", Sources: envVar("runners")},
			&cli.IntFlag{Name: "runner-concurrency", Usage: "workers per runner (default: the runner's)", Sources: envVar("runner-concurrency")},
			&cli.IntFlag{Name: "registry-concurrency", Usage: "jobs the registry processes at once (default: the registry's)", Sources: envVar("registry-concurrency")},
			&cli.IntFlag{Name: "runner-http-idle-conns", Usage: "in-process runners: idle HTTP connections per host (0: the runner's default client)", Sources: envVar("runner-http-idle-conns")},
			&cli.BoolFlag{Name: "history", Value: true, Usage: "run the history writers, as `sundial runner` does", Sources: envVar("history")},
			&cli.BoolFlag{Name: "processes", Usage: "run dispatchers and runners as subprocesses (always for crash)", Sources: envVar("processes")},
			&cli.BoolFlag{Name: "dispatcher-process", Value: true, Usage: "run the dispatchers as subprocesses (registry and runners in the bench process) and report the first one's memory; on by default, =false runs them in the bench process", Sources: envVar("dispatcher-process")},
			&cli.StringFlag{Name: "binary", Usage: "sundial binary for the subprocesses (default: go build ./cmd/sundial)", Sources: envVar("binary")},
			&cli.StringFlag{Name: "target", Value: "http", Usage: "http (the counting downstream) or noop (in-process handler, no effects counted)", Sources: envVar("target")},
			&cli.IntFlag{Name: "payload-bytes", Value: 64, Usage: "payload of each job", Sources: envVar("payload-bytes")},
			&cli.DurationFlag{Name: "effect-duration", Usage: "how long the counting downstream takes to apply one effect (default 10ms)", Sources: envVar("effect-duration")},
			&cli.DurationFlag{Name: "baseline-duration", Usage: "how long each of K, R and C is measured (default 10s)", Sources: envVar("baseline-duration")},
			&cli.StringFlag{Name: "crash-kill", Usage: "crash: runner, dispatcher or both (default both)", Sources: envVar("crash-kill")},
			&cli.DurationFlag{Name: "crash-after", Usage: "crash: kill this long into the window (default a third of it)", Sources: envVar("crash-after")},
			&cli.DurationFlag{Name: "crash-down", Usage: "crash: how long the killed process stays down (default 5s)", Sources: envVar("crash-down")},
			&cli.IntFlag{Name: "dag-engines", Usage: "chaos: `sundial dag engine` subprocesses (default 2)", Sources: envVar("dag-engines")},
			&cli.IntFlag{Name: "dags", Usage: "chaos: DAGs running throughout (default 20)", Sources: envVar("dags")},
			&cli.IntFlag{Name: "dag-nodes", Usage: "chaos: nodes in each DAG's chain (default 3)", Sources: envVar("dag-nodes")},
			&cli.DurationFlag{Name: "dag-every", Usage: "chaos: how often each DAG fires (default 10s)", Sources: envVar("dag-every")},
			&cli.DurationFlag{Name: "chaos-every", Usage: "chaos: interval between two process kills (default 30s)", Sources: envVar("chaos-every")},
			&cli.DurationFlag{Name: "chaos-process-down", Usage: "chaos: how long a killed process stays down (default 2s)", Sources: envVar("chaos-process-down")},
			&cli.DurationFlag{Name: "chaos-backend-down", Usage: "chaos: how long a killed backend stays down before its restart (default 5s)", Sources: envVar("chaos-backend-down")},
			&cli.StringSliceFlag{Name: "chaos-backends", Usage: "chaos: backends killed once each, in order (default redis,kafka,cassandra; none: no backend)", Sources: envVar("chaos-backends")},
			&cli.UintFlag{Name: "chaos-seed", Usage: "chaos: seed of the choice of victims (default: from the clock; the report names it)", Sources: envVar("chaos-seed")},
			&cli.StringFlag{Name: "stack-script", Usage: "chaos: deploy/local/stack.sh of the stack whose backends are killed and restarted (the run refuses a stack it does not answer for)", Sources: envVar("stack-script")},
			&cli.DurationFlag{Name: "asynq-delayed-check", Usage: "peer: asynq's DelayedTaskCheckInterval (default asynq's 5s)", Sources: envVar("asynq-delayed-check")},
			&cli.IntFlag{Name: "asynq-concurrency", Usage: "peer: asynq workers (default: runners × runner concurrency)", Sources: envVar("asynq-concurrency")},
			&cli.BoolFlag{Name: "keep", Usage: "keep the namespace (topics, keyspace, Redis keys) afterwards", Sources: envVar("keep")},
			&cli.StringFlag{Name: "results-dir", Value: "bench/results", Usage: "where the results folder is written", Sources: envVar("results-dir")},
			&cli.StringFlag{Name: "pprof-addr", Usage: "serve net/http/pprof of the bench process (and an in-process pipeline) on this address", Sources: envVar("pprof-addr")},
			&cli.StringFlag{Name: "cpu-profile", Usage: "write a CPU profile of the bench process over the measured window to this file", Sources: envVar("cpu-profile")},
			&cli.StringFlag{Name: "log-level", Value: "warn", Usage: "log level of the pipeline's components", Sources: envVar("log-level")},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() != 1 {
				return fmt.Errorf("bench: name one scenario: %s", strings.Join(bench.Scenarios, ", "))
			}
			mix, err := loadgen.ParseMix(cmd.String("mix"))
			if err != nil {
				return fmt.Errorf("--mix: %w", err)
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(cmd.String("log-level"))); err != nil {
				return fmt.Errorf("--log-level %q: want debug, info, warn or error", cmd.String("log-level"))
			}
			b := &bench.Bench{
				Config: bench.Config{
					Scenario: cmd.Args().First(), Jobs: cmd.Int("jobs"), Rate: cmd.Float("rate"), Duration: cmd.Duration("duration"),
					Drain: cmd.Duration("drain"), Lead: cmd.Duration("lead"), Mix: mix, Shards: cmd.Int("shards"),
					Dispatchers: cmd.Int("dispatchers"), Runners: cmd.Int("runners"), RunnerConcurrency: cmd.Int("runner-concurrency"),
					RunnerHTTPIdleConns: cmd.Int("runner-http-idle-conns"), RegistryConcurrency: cmd.Int("registry-concurrency"), History: cmd.Bool("history"), Processes: cmd.Bool("processes"), DispatcherProcess: cmd.Bool("dispatcher-process"),
					Binary: cmd.String("binary"), Target: cmd.String("target"), PayloadBytes: cmd.Int("payload-bytes"), EffectDuration: cmd.Duration("effect-duration"),
					BaselineDuration: cmd.Duration("baseline-duration"), CrashKill: cmd.String("crash-kill"),
					CrashAfter: cmd.Duration("crash-after"), CrashDown: cmd.Duration("crash-down"),
					DagEngines: cmd.Int("dag-engines"), Dags: cmd.Int("dags"), DagNodes: cmd.Int("dag-nodes"), DagEvery: cmd.Duration("dag-every"),
					ChaosEvery: cmd.Duration("chaos-every"), ChaosProcessDown: cmd.Duration("chaos-process-down"), ChaosBackendDown: cmd.Duration("chaos-backend-down"),
					ChaosBackends: cmd.StringSlice("chaos-backends"), ChaosSeed: uint64(cmd.Uint("chaos-seed")), StackScript: cmd.String("stack-script"),
					AsynqDelayedCheck: cmd.Duration("asynq-delayed-check"), AsynqConcurrency: cmd.Int("asynq-concurrency"),
					Keep: cmd.Bool("keep"), ResultsDir: cmd.String("results-dir"),
				},
				Backends: bench.Backends{Brokers: cmd.StringSlice("kafka-brokers"), CassandraHosts: cmd.StringSlice("cassandra-hosts"),
					RedisAddr: cmd.String("redis-addr")},
				Progress:   cmd.Root().Writer,
				CPUProfile: cmd.String("cpu-profile"),
				Logger:     slog.New(slog.NewTextHandler(cmd.Root().ErrWriter, &slog.HandlerOptions{Level: level})),
			}
			if addr := cmd.String("pprof-addr"); addr != "" {
				stop, err := servePprof(ctx, addr)
				if err != nil {
					return err
				}
				defer stop()
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

// servePprof serves the runtime profiles on addr until stop is called.
func servePprof(ctx context.Context, addr string) (stop func(), err error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof-addr %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return func() { _ = srv.Close() }, nil
}
