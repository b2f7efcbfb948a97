// Package bench runs Sundial's capacity scenarios on the real stack (Kafka,
// Cassandra, Redis) and writes reports: steady, herd, crash, peer (asynq
// over the same Redis), chaos, capacity and workers (the stock runner and
// SDK workers through the worker gateway). `sundial bench` and `make bench
// SCENARIO=...` drive it; bench/README.md explains how to run the scenarios
// and read the reports.
//
// Every scenario runs the steps below. What one scenario changes (its
// defaults and checks, its workload, its pipeline, what it does during the
// window, what it adds after the drain, its targets and plots) is its type
// in scenario.go, found by name in the scenarios table; no other code
// compares a scenario's name.
//
// # One run
//
//  1. Describe the commit (git), the machine (/proc) and the backends'
//     versions (Kafka: franz-go's guess from the broker's API versions;
//     Cassandra: system.local; Redis: INFO).
//  2. Create a namespace of the run's own: topic prefix, keyspace (the
//     store's migrations, S shards) and Redis key prefix, and consumer
//     groups named after the prefix. The run topics are created with
//     message.timestamp.type=LogAppendTime so that a run record's timestamp
//     is the broker's append (the acknowledgement, with one in-sync
//     replica): dispatch latency is read from it. Everything is deleted at
//     the end unless Config.Keep.
//  3. Measure the baselines in the same run, one after the other, before
//     the pipeline starts: K (MeasureKafka: produce→consume on one topic
//     with the runs topic's partitions, the dispatcher's producer settings
//     and the size of the workload's run record), R (MeasureRedis: acquire
//     and complete through leasing.Store, plain and pipelined) and C
//     (MeasureCassandra: PutDue of one scheduled due entry per call, with
//     due times beyond every catch-up horizon so no dispatcher reads them).
//     B = min(K, R plain / lease calls per run, C / writes per run), with
//     the per-run counts of perRunWork, read off the code paths: the
//     dispatcher writes the next occurrence (1 write, no read) and emits
//     the run and ENQUEUED, the runner makes 2 EVALSHA calls (acquire,
//     complete) and emits SUCCEEDED carrying the start (STARTED only for a
//     run longer than runner.Config.StartedDelay), and the history writer
//     stores the two as one runs row and its runs_by_time row (2
//     writes). The report's "Backend work per run" counts the requests
//     themselves, by component, from the clients' hooks.
//     L = min(K, R plain / 2, C / 1) (Limit) is the same with the least work
//     a run can ever need; every system is reported as a fraction of both.
//     With Config.Noisy, the CPU hog (Hog, a child process running RunHog)
//     starts after the baselines and runs until the run ends. With
//     Config.APIWatch, the API server (APIWatch: `sundial api` of the same
//     binary as a child process, Bench.APICommand, on a loopback port, so
//     that its CPU is its own) starts there too, with a cluster-admin
//     client in the bench reading WatchRuns of every run, and stops when
//     the pipeline's run has drained.
//  4. Start the pipeline: in-process components (registry, dispatchers,
//     runners, history writers) or, for crash and chaos, `sundial
//     dispatcher` and `sundial runner` (and for chaos `sundial dag engine`)
//     subprocesses of a freshly built binary with the registry in the
//     bench process.
//  5. Register the workload through loadgen (the Go client), wait for the
//     registry to accept it, measure the window, drain, and compare with
//     the workload's expected runs. During the window (not in capacity
//     steps), the profiler takes a CPU profile of Config.ProfileSpan in
//     its middle and a heap profile at its end of the bench process
//     (runtime/pprof) and of each subprocess (its --pprof-addr, a loopback
//     port the bench picks), and the CPU sampler reads every second the
//     CPU times of the stack's backends (pid files of the stack folder,
//     else the listener of the backend's port), of the bench process, the
//     subprocesses, the API server and the hog, and of the machine (/proc). A failed
//     capture or a process not found is reported, never an error of the
//     run. The registration is watched the same way (registration.go): the
//     CPU sampler from the first definition produced to the last accepted,
//     and a CPU profile of the bench process, where the registry runs; it
//     ends before the window's profiles start, as a process has one CPU
//     profile at a time. A steady workload registers its
//     cron jobs first to time the registry, and anchors the interval jobs
//     with a start at the estimated end of registration, so that they do
//     not fire (and slow the registry) while the rest is registered.
//  6. Write report.json, summary.md, the PNG plots and the profiles
//     (profiles/<process>.<cpu|heap>.pprof) into
//     <ResultsDir>/<UTC timestamp>-<scenario>/.
//
// # The summary
//
// summary.md is laid out by one text/template, summary.md.tmpl (embedded;
// a named template per section: header, baselines, results, systemNotes,
// chaos, capacity, system, cpu, cpuTable, profiles, top, registration,
// memory, targets, notes, plots). Report.Markdown executes it on a view
// built in Go: summary.go builds the whole (the results rows, the crash
// verdicts) and each section's data has its builder beside it
// (cpuTableSummary in cpu.go, profilesSummary in profiles.go,
// registrationSummary in registration.go, chaosSummary in chaosreport.go,
// memorySummary and capacitySummary in report.go). The template's
// functions only format a value (a time, a size, a share).
//
// # Chaos
//
// The chaos scenario kills, on a seeded schedule (ChaosPlan.Kills, pure),
// a random subprocess every interval and each backend of the stack once,
// and restarts them; DAGs (DagWorkload) run throughout. It kills backends
// only through deploy/local/stack.sh (Stack: `kill`, then `up`), and
// refuses to start unless that script answers for the bench's own backend
// addresses and reports them all ready. A subprocess that exits on its own
// is restarted by Processes' supervisor and reported, never hidden. Jobs
// and DAGs use the misfire policy FIRE_ALL, so an occurrence missed during
// an outage is late, not lost; lost runs and DAG runs are counted after
// the drain.
//
// # Capacity
//
// The capacity scenario runs CapacitySearch (pure: doubling, halving, then
// bisecting, with the measurement as a function) over steady steps of
// interval jobs, one fresh pipeline per step in a namespace of its own
// (Namespace.Step, torn down after the step), so that a failing step's
// backlog cannot run in the next, and reports the highest rate whose trigger p95 stayed
// within CapacityP95 with nothing lost, as a fraction of L.
//
// # Workers
//
// The workers scenario runs the same handler workload (every job's target
// WorkersHandler, which applies the run's effect at the counting
// downstream) twice: through the pipeline whose in-process runners have
// it compiled in (PipelineConfig.EffectURL), then, in a namespace of its
// own (Namespace.Step), through a pipeline whose runners lack it, beside
// Workers: the worker gateway in a `sundial api --worker-gateway`
// subprocess and `sundial bench worker` subprocesses (RunWorker: package
// worker with the API's address and the team's token only). The runners
// hand every run to the gateway; the bench registers the workload once
// the gateway's metrics count every worker as connected. The CPU sampler
// reads the gateway and the workers as pipeline processes.
//
// # Invariants
//
//   - Never the embedded backends: Backends must name a real stack, and
//     every report names the backends and their versions.
//   - Every figure of a report comes from the same run: baselines, latency,
//     counts. Lost, duplicate executions and duplicate effects are always
//     reported, zero or not.
//   - The summary's template lays out and formats what its view holds:
//     every figure it shows (a ratio, a sum, a verdict, a row of the
//     results) is computed in Go. testdata/summary-*.md are the summaries
//     of reports of every scenario, byte for byte.
//   - A run touches nothing outside its namespace (the subprocess runners'
//     lease keys, under the default prefix, carry the namespace's job ids
//     and are deleted too).
//
// # Dependencies
//
// gonum.org/v1/plot draws the PNG plots; github.com/hibiken/asynq is the
// peer scheduler; HdrHistogram (through package loadgen) keeps the
// latency distributions; the profile package of github.com/google/pprof
// reads the CPU profiles' top functions.
package bench
