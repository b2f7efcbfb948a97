package telemetry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sundialhq/sundial/internal/deps"
	"github.com/sundialhq/sundial/internal/lifecycle"
)

// Defaults of Config.
const (
	DefaultAddr         = ":9464"
	DefaultCheckTimeout = 2 * time.Second
	DefaultStopTimeout  = 5 * time.Second
)

// Config configures a Server.
type Config struct {
	// Addr is the address to listen on, "host:port"; port 0 picks a free
	// port (see Server.Addr). Default DefaultAddr.
	Addr string
	// Gatherer is what /metrics serves, normally the registry from
	// NewRegistry. Required.
	Gatherer prometheus.Gatherer
	// Registerer, if set, receives the metrics of the /metrics handler
	// itself (scrapes served and failed). Usually the same registry.
	Registerer prometheus.Registerer
	// CheckTimeout bounds each readiness check of one /readyz request.
	// Default DefaultCheckTimeout.
	CheckTimeout time.Duration
	// StopTimeout bounds how long Stop waits for requests in progress.
	// Default DefaultStopTimeout.
	StopTimeout time.Duration
	// Logger logs listen errors and failed readiness checks. Nil discards.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	c.Addr = cmp.Or(c.Addr, DefaultAddr)
	c.CheckTimeout = cmp.Or(c.CheckTimeout, DefaultCheckTimeout)
	c.StopTimeout = cmp.Or(c.StopTimeout, DefaultStopTimeout)
	c.Logger = deps.Logger(c.Logger)
	return c
}

// Validate reports every invalid field, after defaults are applied.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("telemetry config: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.Gatherer == nil {
		bad("Gatherer", "is required")
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		bad("Addr", "%q is not host:port: %v", c.Addr, err)
	}
	if c.CheckTimeout < 0 {
		bad("CheckTimeout", "%s is negative", c.CheckTimeout)
	}
	if c.StopTimeout < 0 {
		bad("StopTimeout", "%s is negative", c.StopTimeout)
	}
	return errors.Join(errs...)
}

// A Check reports whether one thing the process depends on is usable: nil
// when it is, an error saying why not otherwise. It must return soon after
// ctx is done.
type Check func(ctx context.Context) error

// Server serves a process's /metrics, /healthz and /readyz over HTTP.
//
// /readyz is not ready until MarkStarted is called, so a process that is still
// starting its components is not reported ready because their checks are
// not registered yet.
type Server struct {
	cfg     Config
	handler http.Handler

	life lifecycle.Lifecycle

	mu      sync.Mutex
	checks  map[string]Check
	started bool
	addr    net.Addr
}

// NewServer returns a Server; it listens only once started.
func NewServer(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg.withDefaults(), checks: map[string]Check{}}
	opts := promhttp.HandlerOpts{
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelError),
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: true,
	}
	var metrics http.Handler
	if s.cfg.Registerer != nil {
		opts.Registry = s.cfg.Registerer
		metrics = promhttp.InstrumentMetricHandler(s.cfg.Registerer, promhttp.HandlerFor(s.cfg.Gatherer, opts))
	} else {
		metrics = promhttp.HandlerFor(s.cfg.Gatherer, opts)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", s.serveReady)
	s.handler = mux
	return s, nil
}

// Handler is the server's HTTP handler, for mounting elsewhere or testing.
func (s *Server) Handler() http.Handler { return s.handler }

// AddCheck registers a readiness check under a name (the component and what
// it checks, e.g. "runner-kafka"). Checks can be added before or after Start;
// a name can be used once.
func (s *Server) AddCheck(name string, check Check) error {
	if name == "" || strings.ContainsAny(name, " \n") {
		return fmt.Errorf("telemetry: check name %q: must be non-empty without spaces or newlines", name)
	}
	if check == nil {
		return fmt.Errorf("telemetry: check %q: nil", name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.checks[name]; ok {
		return fmt.Errorf("telemetry: check %q: already registered", name)
	}
	s.checks[name] = check
	return nil
}

// MarkStarted tells the server that every component has started and
// registered its checks: from now on /readyz reports their results.
func (s *Server) MarkStarted() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started = true
}

// Start listens on the configured address and serves in the background.
// A listen error is returned; later serve errors are logged. A stopped
// Server may be started again.
func (s *Server) Start(ctx context.Context) error {
	if err := s.life.Start(ctx, s.start); err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	return nil
}

func (s *Server) start(ctx context.Context, run *lifecycle.Run) error {
	addr, err := serve(ctx, run, s.cfg.Addr, s.handler, s.cfg.StopTimeout, s.cfg.Logger)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.addr = addr
	s.mu.Unlock()
	s.cfg.Logger.Info("serving metrics and health", "addr", addr.String())
	return nil
}

// serve listens on addr and serves h in goroutines owned by run, until the
// run stops; requests in progress then get stopTimeout to finish. It
// returns the address listened on.
func serve(ctx context.Context, run *lifecycle.Run, addr string, h http.Handler, stopTimeout time.Duration, logger *slog.Logger) (net.Addr, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	run.Go(func(context.Context) {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("telemetry server stopped", "addr", ln.Addr().String(), "err", err)
		}
	})
	// Serve returns once Shutdown (or Close) has run: this goroutine ends
	// it when the run stops, letting requests in progress finish within
	// stopTimeout.
	run.Go(func(ctx context.Context) {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			_ = srv.Close()
		}
	})
	return ln.Addr(), nil
}

// Addr is the address the server listens on; nil before Start.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Stop shuts the server down, letting requests in progress finish within
// StopTimeout. Idempotent and safe before Start; it returns once the serving
// goroutine has exited.
func (s *Server) Stop() { s.life.Stop() }

// CheckResult is the outcome of one readiness check.
type CheckResult struct {
	Name string
	// Err is nil when the check passed.
	Err error
}

// RunChecks runs every registered check concurrently, each under
// CheckTimeout, and returns the results sorted by name; started is false
// before MarkStarted.
func (s *Server) RunChecks(ctx context.Context) (results []CheckResult, started bool) {
	s.mu.Lock()
	started = s.started
	checks := make(map[string]Check, len(s.checks))
	for n, c := range s.checks {
		checks[n] = c
	}
	s.mu.Unlock()

	results = make([]CheckResult, 0, len(checks))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, check := range checks {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, s.cfg.CheckTimeout)
			defer cancel()
			err := runCheck(cctx, check)
			mu.Lock()
			results = append(results, CheckResult{Name: name, Err: err})
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.SortFunc(results, func(a, b CheckResult) int { return strings.Compare(a.Name, b.Name) })
	return results, started
}

// runCheck runs check and turns a panic or a check that overstays its
// context into an error, so one bad check cannot take /readyz down.
func runCheck(ctx context.Context, check Check) (err error) {
	res := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				res <- fmt.Errorf("check panicked: %v", r)
			}
		}()
		res <- check(ctx)
	}()
	select {
	case err = <-res:
		return err
	case <-ctx.Done():
		return fmt.Errorf("no answer: %w", ctx.Err())
	}
}

func (s *Server) serveReady(w http.ResponseWriter, r *http.Request) {
	results, started := s.RunChecks(r.Context())
	var b strings.Builder
	ready := started
	if !started {
		b.WriteString("fail started: the process is still starting\n")
	}
	for _, res := range results {
		if res.Err != nil {
			ready = false
			fmt.Fprintf(&b, "fail %s: %s\n", res.Name, oneLine(res.Err.Error()))
			s.cfg.Logger.Warn("readiness check failed", "check", res.Name, "err", res.Err)
			continue
		}
		fmt.Fprintf(&b, "ok   %s\n", res.Name)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if !ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_, _ = fmt.Fprint(w, b.String())
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }
