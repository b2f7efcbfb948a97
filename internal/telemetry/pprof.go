package telemetry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/sundialhq/sundial/internal/deps"
	"github.com/sundialhq/sundial/internal/lifecycle"
)

// PprofConfig configures a PprofServer.
type PprofConfig struct {
	// Addr is the address to listen on, "host:port"; port 0 picks a free
	// port (see PprofServer.Addr). Required: the profiles expose the
	// process's internals (command line, stacks, memory), so there is no
	// default, and it should be a loopback address.
	Addr string
	// StopTimeout bounds how long Stop waits for requests in progress (a
	// CPU profile or trace being taken is cut short). Default
	// DefaultStopTimeout.
	StopTimeout time.Duration
	// Logger logs listen and serve errors. Nil discards.
	Logger *slog.Logger
}

func (c PprofConfig) withDefaults() PprofConfig {
	c.StopTimeout = cmp.Or(c.StopTimeout, DefaultStopTimeout)
	c.Logger = deps.Logger(c.Logger)
	return c
}

// Validate reports every invalid field, after defaults are applied.
func (c PprofConfig) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Addr == "" {
		errs = append(errs, errors.New("pprof config: Addr: is required"))
	} else if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		errs = append(errs, fmt.Errorf("pprof config: Addr: %q is not host:port: %w", c.Addr, err))
	}
	if c.StopTimeout < 0 {
		errs = append(errs, fmt.Errorf("pprof config: StopTimeout: %s is negative", c.StopTimeout))
	}
	return errors.Join(errs...)
}

// PprofServer serves the Go runtime's profiles (net/http/pprof) of the
// process on a listener of its own, apart from /metrics, so that they can be
// served on a loopback address while the metrics are scraped from outside.
// It mounts the handlers on its own mux, never on http.DefaultServeMux.
type PprofServer struct {
	cfg     PprofConfig
	handler http.Handler
	life    lifecycle.Lifecycle

	mu   sync.Mutex
	addr net.Addr
}

// NewPprofServer returns a PprofServer; it listens only once started.
func NewPprofServer(cfg PprofConfig) (*PprofServer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &PprofServer{cfg: cfg.withDefaults(), handler: PprofHandler()}, nil
}

// PprofHandler serves net/http/pprof under /debug/pprof/: the index and
// the named profiles (heap, goroutine, allocs, block, mutex,
// threadcreate), cmdline, profile (CPU, ?seconds=N), symbol and trace.
func PprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// Handler is the server's HTTP handler.
func (s *PprofServer) Handler() http.Handler { return s.handler }

// Start listens on the configured address and serves in the background. A
// listen error is returned; later serve errors are logged. A stopped
// PprofServer may be started again.
func (s *PprofServer) Start(ctx context.Context) error {
	if err := s.life.Start(ctx, s.start); err != nil {
		return fmt.Errorf("pprof: %w", err)
	}
	return nil
}

func (s *PprofServer) start(ctx context.Context, run *lifecycle.Run) error {
	addr, err := serve(ctx, run, s.cfg.Addr, s.handler, s.cfg.StopTimeout, s.cfg.Logger)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.addr = addr
	s.mu.Unlock()
	return nil
}

// Addr is the address the server listens on; nil before Start.
func (s *PprofServer) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Stop shuts the server down, letting requests in progress finish within
// StopTimeout. Idempotent and safe before Start; it returns once the serving
// goroutines have exited.
func (s *PprofServer) Stop() { s.life.Stop() }
