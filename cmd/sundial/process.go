package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v3"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/sundialhq/sundial/internal/lifecycle"
	"github.com/sundialhq/sundial/internal/telemetry"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store/cassandra"
)

// processFlags are the flags every long-running component command shares:
// where to serve /metrics, /healthz and /readyz, where to serve the Go
// profiles, and how to log.
func processFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "metrics-addr", Usage: "serve /metrics, /healthz and /readyz on this address (host:port); empty: do not serve", Sources: envVar("metrics-addr")},
		&cli.StringFlag{Name: "pprof-addr", Usage: "serve the Go runtime's profiles (net/http/pprof under /debug/pprof/) on this address (host:port), apart from /metrics; use a loopback address such as 127.0.0.1:6060, since they expose the process's internals; empty: do not serve", Sources: envVar("pprof-addr")},
		&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error", Sources: envVar("log-level")},
		&cli.StringFlag{Name: "log-format", Value: "text", Usage: "text (key=value, for people) or json (one object per line)", Sources: envVar("log-format")},
		&cli.BoolFlag{Name: "tracing", Usage: "export OpenTelemetry spans of each run's steps over OTLP/HTTP, configured by the standard OTEL_* variables (OTEL_EXPORTER_OTLP_ENDPOINT, default http://localhost:4318; OTEL_SERVICE_NAME, default sundial-<component>; OTEL_TRACES_SAMPLER); off: no spans, no traceparent sent", Sources: envVar("tracing")},
		&cli.StringFlag{Name: "record-encoding", Value: "protobuf", Usage: "encoding of the events (sundial.events) and definition answers (sundial.jobs.status) this process writes: protobuf, or json for people and tools such as kcat (docs/observability.md); a content-type header says which, and every reader takes both", Sources: envVar("record-encoding")},
		&cli.IntFlag{Name: "memory-limit-mib", Usage: "soft limit of the process's Go memory in MiB: the garbage collector works harder as the heap nears it, so the process's memory stays near it unless what it holds live exceeds it; set it to about 80% of the container's memory (0: the Go runtime's default, or GOMEMLIMIT)", Sources: envVar("memory-limit-mib")},
	}
}

// process is the scaffolding of one long-running command: its logger, its
// metrics registry, its telemetry server and its profile server.
type process struct {
	base   *slog.Logger // without a component attribute
	logger *slog.Logger // base with the command's component
	reg    *prometheus.Registry
	server *telemetry.Server      // nil without --metrics-addr
	pprof  *telemetry.PprofServer // nil without --pprof-addr

	cassandra *telemetry.CassandraObserver // created by instrumentCassandra
	// work counts the requests the process's clients send to the
	// backends (sundial_backend_requests_total).
	work *telemetry.WorkCounter
	// tracer is the process's tracer provider with --tracing, handed to
	// each component's Config; nil without (tracing off).
	tracer *sdktrace.TracerProvider
	// encoding is --record-encoding.
	encoding sundialv1.Encoding
}

// tracerProvider is the provider for the components' Configs: nil (tracing
// off) without --tracing, never a typed nil.
func (p *process) tracerProvider() trace.TracerProvider {
	if p.tracer == nil {
		return nil
	}
	return p.tracer
}

// backendFlags reads the Kafka flags (kafkaFlags) and the Cassandra flags
// (cassandraStoreFlags), and returns what is wrong with them, all of it.
func backendFlags(cmd *cli.Command) ([]kgo.Opt, cassandra.Config, []error) {
	var bad []error
	kopts, err := kafkaOptions(cmd)
	if err != nil {
		bad = append(bad, err)
	}
	cc, err := cassandraConfig(cmd)
	if err != nil {
		bad = append(bad, err)
	}
	return kopts, cc, bad
}

// serverFlags reads the flags every server command shares: backendFlags
// and the process's own (newProcess, for component). The command adds its
// own checks to bad and reports them all together before it connects to
// anything; p is nil when the process flags are wrong.
func serverFlags(ctx context.Context, cmd *cli.Command, component string) (kopts []kgo.Opt, cc cassandra.Config, p *process, bad []error) {
	kopts, cc, bad = backendFlags(cmd)
	p, err := newProcess(ctx, cmd, component)
	if err != nil {
		bad = append(bad, err)
	}
	return kopts, cc, p, bad
}

// newProcess reads processFlags. The telemetry server is created but not
// started: components add their readiness checks first.
func newProcess(ctx context.Context, cmd *cli.Command, component string) (*process, error) {
	logger, err := telemetry.NewLogger(cmd.Root().ErrWriter, telemetry.LogConfig{
		Format: cmd.String("log-format"), Level: cmd.String("log-level"),
	})
	if err != nil {
		return nil, fmt.Errorf("--log-level/--log-format: %w", err)
	}
	p := &process{base: logger, logger: logger.With("component", component), reg: telemetry.NewRegistry(), work: &telemetry.WorkCounter{}}
	if err := p.work.Register(p.reg); err != nil {
		return nil, err
	}
	if mib := cmd.Int("memory-limit-mib"); mib != 0 {
		if mib < 0 {
			return nil, fmt.Errorf("--memory-limit-mib %d: must not be negative", mib)
		}
		// The process's own setting, made once before any component
		// starts: the runtime has one limit per process.
		debug.SetMemoryLimit(int64(mib) << 20)
	}
	if addr := cmd.String("metrics-addr"); addr != "" {
		p.server, err = telemetry.NewServer(telemetry.Config{Addr: addr, Gatherer: p.reg, Registerer: p.reg, Logger: p.logger})
		if err != nil {
			return nil, fmt.Errorf("--metrics-addr: %w", err)
		}
	}
	if p.encoding, err = sundialv1.ParseEncoding(cmd.String("record-encoding")); err != nil {
		return nil, fmt.Errorf("--record-encoding: %w", err)
	}
	if cmd.Bool("tracing") {
		if p.tracer, err = newTracerProvider(ctx, component); err != nil {
			return nil, err
		}
	}
	if addr := cmd.String("pprof-addr"); addr != "" {
		p.pprof, err = telemetry.NewPprofServer(telemetry.PprofConfig{Addr: addr, Logger: p.logger})
		if err != nil {
			return nil, fmt.Errorf("--pprof-addr: %w", err)
		}
	}
	return p, nil
}

// named is the process's logger for another component of the process.
func (p *process) named(component string) *slog.Logger {
	return p.base.With("component", component)
}

// instrumentCassandra sets the process's Cassandra observer on c, so the
// statements of the store opened with c are measured on the process's
// registry. The observer is created, and its metrics registered, on first
// use: a process has one, however many stores it opens.
func (p *process) instrumentCassandra(c *cassandra.Config) error {
	if p.cassandra == nil {
		o, err := telemetry.NewCassandraObserver(p.reg)
		if err != nil {
			return err
		}
		p.cassandra = o
		p.work.Then(o, o)
	}
	c.QueryObserver, c.BatchObserver = p.work, p.work
	return nil
}

// kafkaMetrics is the option that measures a Kafka client of the process
// (telemetry.KafkaMetrics, named name) and counts its requests.
func (p *process) kafkaMetrics(name string) kgo.Opt {
	return telemetry.KafkaMetrics(p.reg, name, p.work.KafkaHook())
}

// check registers a readiness check for /readyz; a no-op without a server.
func (p *process) check(name string, c telemetry.Check) error {
	if p.server == nil {
		return nil
	}
	return p.server.AddCheck(name, c)
}

// run starts the profile server, the telemetry server and the components in
// order, marks the process ready, waits until ctx ends, then stops the
// components in reverse order and the servers last.
func (p *process) run(ctx context.Context, components ...lifecycle.Component) error {
	if p.tracer != nil {
		// Last, after the components stopped: their final spans go out.
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tracerShutdownTimeout)
			defer cancel()
			if err := p.tracer.Shutdown(sctx); err != nil {
				p.logger.Warn("spans not exported at shutdown", "err", err)
			}
		}()
	}
	if p.pprof != nil {
		if err := p.pprof.Start(ctx); err != nil {
			return fmt.Errorf("--pprof-addr: %w", err)
		}
		defer p.pprof.Stop()
		p.logger.Info("serving /debug/pprof/", "addr", p.pprof.Addr().String())
	}
	if p.server != nil {
		if err := p.server.Start(ctx); err != nil {
			return err
		}
		defer p.server.Stop()
		p.logger.Info("serving /metrics, /healthz and /readyz", "addr", p.server.Addr().String())
	}
	stop, err := lifecycle.StartAll(ctx, components...)
	defer stop()
	if err != nil {
		return err
	}
	if p.server != nil {
		p.server.MarkStarted()
	}
	p.logger.Info("started")
	<-ctx.Done()
	p.logger.Info("stopping")
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
