// Package telemetry makes a Sundial process observable: the HTTP server that
// serves /metrics, /healthz and /readyz, the server of the Go runtime's
// profiles (PprofServer, /debug/pprof/), the process's structured logger,
// and the instrumentation of the three backend clients (Kafka, Redis,
// Cassandra).
//
// Invariants:
//
//   - No global state. Every metric is registered on the prometheus.Registerer
//     the caller hands in; nothing is registered on the default registry and
//     nothing happens in init(). Two instrumented clients of one kind in one
//     registry must carry different client names, or registration fails with
//     an error (never a panic).
//   - Label values are bounded. No metric built here carries a job id, a run
//     id, a keyspace or a topic prefix: Redis is labelled by command name,
//     Cassandra by statement kind and table, Kafka by broker node and topic
//     (a fixed set). Components follow the same rule for their own metrics:
//     shard number, priority, outcome, reason or the name of a downstream.
//   - Metric names read sundial_<component>_<what>_<unit>. Latency histograms
//     are built with HistogramOpts, which gives them both classic buckets (so
//     every Prometheus can compute ratios against a fixed threshold such as the
//     1 s trigger-latency objective) and native-histogram parameters (used by
//     a Prometheus that scrapes native histograms).
//   - /healthz answers 200 as long as the process serves HTTP: it says the
//     process is alive, nothing about its backends, so a restart loop never
//     follows a backend outage. /readyz runs the readiness checks registered
//     by the process's components (backends reachable; for a dispatcher,
//     shards owned) concurrently, each under a timeout, and answers 503 with
//     the failing checks named when one fails.
//   - Logs are slog records; job_id and run_id are attributes (WithRun,
//     ContextWithRun), never part of the message, so they can be searched.
//   - The Server follows internal/lifecycle: Stop shuts it down (requests in
//     progress get StopTimeout), is idempotent and safe before Start, and
//     returns once the serving goroutines have exited; it may be started
//     again. Registered checks and MarkStarted survive a restart.
//   - The profiles are served only when asked for (PprofServer has no
//     default address), on a listener of their own and a mux of their own:
//     they expose the command line, stacks and memory, so they belong on a
//     loopback address, while /metrics is scraped from outside. Nothing is
//     served from http.DefaultServeMux, on which importing net/http/pprof
//     registers its handlers. The PprofServer has the Server's lifecycle; a
//     CPU profile or trace in progress at Stop gets StopTimeout.
//
// Dependencies: prometheus/client_golang for metrics and promhttp;
// franz-go's kprom plugin for the Kafka client's metrics (maintained with
// franz-go itself, so its hooks follow the client's). The go-redis hook and
// the gocql observer are small enough to live here: the go-redis
// OpenTelemetry extra would bring the OpenTelemetry SDK for one histogram.
package telemetry
