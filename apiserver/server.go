package apiserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sundialhq/sundial/internal/deps"
	"github.com/sundialhq/sundial/internal/lifecycle"
)

// HealthPath answers 200 while the server runs; it needs no token.
const HealthPath = "/healthz"

// MetricsPath serves Config.Gatherer, when set; it needs no token.
const MetricsPath = "/metrics"

// Handler is a path and the handler that serves everything under it.
type Handler struct {
	// Path is a pattern of http.ServeMux, "/sundial.api.v1.JobService/"
	// for a Connect service.
	Path    string
	Handler http.Handler
}

// Service builds a Connect service's Handler with the options every
// service of the server shares (authentication and metrics interceptors).
type Service func(opts ...connect.HandlerOption) Handler

// ConnectService adapts a generated Connect constructor, such as
// apiv1connect.NewJobServiceHandler, and its implementation to a Service.
func ConnectService[T any](newHandler func(T, ...connect.HandlerOption) (string, http.Handler), impl T) Service {
	return func(opts ...connect.HandlerOption) Handler {
		path, h := newHandler(impl, opts...)
		return Handler{Path: path, Handler: h}
	}
}

// Config configures a Server.
type Config struct {
	// Addr is the address to listen on, host:port. Required; port 0 picks
	// a free port (see Server.Addr).
	Addr string
	// Authenticator checks every request's bearer token. Required.
	Authenticator Authenticator
	// Services are the Connect services to mount, each with the
	// authentication and metrics interceptors.
	Services []Service
	// Handlers are plain HTTP handlers to mount beside the services (a
	// server-sent-events stream, say). Each is wrapped in the same
	// authentication, answering 401 without a valid token.
	Handlers []Handler
	// Registerer receives the request metrics. Default: a registry of the
	// server's own, which nothing scrapes.
	Registerer prometheus.Registerer
	// Gatherer, when set, is served on MetricsPath.
	Gatherer prometheus.Gatherer
	// Logger; nil discards.
	Logger *slog.Logger
	// ShutdownGrace is how long Stop lets requests in flight finish before
	// it closes their connections. Default 10 s.
	ShutdownGrace time.Duration
	// ReadHeaderTimeout bounds how long a client may take to send its
	// request headers. Default 10 s.
	ReadHeaderTimeout time.Duration
	// Now is the clock of the duration metric. Default time.Now.
	Now func() time.Time
}

// Validate reports every bad field.
func (c Config) Validate() error {
	var errs []error
	if c.Addr == "" {
		errs = append(errs, errors.New("api server config: addr: required"))
	}
	if c.Authenticator == nil {
		errs = append(errs, errors.New("api server config: authenticator: required"))
	}
	if c.ShutdownGrace < 0 {
		errs = append(errs, fmt.Errorf("api server config: shutdown grace %v: must not be negative", c.ShutdownGrace))
	}
	if c.ReadHeaderTimeout < 0 {
		errs = append(errs, fmt.Errorf("api server config: read header timeout %v: must not be negative", c.ReadHeaderTimeout))
	}
	for i, h := range c.Handlers {
		if h.Path == "" || h.Handler == nil {
			errs = append(errs, fmt.Errorf("api server config: handlers[%d]: path and handler are required", i))
		}
	}
	return errors.Join(errs...)
}

// Server serves the control-plane API: every service on one mux, so that
// one port answers gRPC, gRPC-Web and HTTP/JSON.
type Server struct {
	cfg     Config
	mux     *http.ServeMux
	metrics *metrics
	life    lifecycle.Lifecycle
	addr    net.Addr
}

// New builds the server and its mux; nothing listens before Start.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Logger = deps.Logger(cfg.Logger)
	cfg.ShutdownGrace = cmp.Or(cfg.ShutdownGrace, 10*time.Second)
	cfg.ReadHeaderTimeout = cmp.Or(cfg.ReadHeaderTimeout, 10*time.Second)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	m, err := newMetrics(cfg.Registerer, cfg.Now)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), metrics: m}
	// The metrics interceptor runs first, so that refused requests are
	// counted too.
	opts := []connect.HandlerOption{
		connect.WithInterceptors(m.interceptor(), NewAuthInterceptor(cfg.Authenticator)),
		connect.WithCodec(strictJSON{name: "json"}),
		connect.WithCodec(strictJSON{name: "json; charset=utf-8"}),
	}
	for _, svc := range cfg.Services {
		h := svc(opts...)
		s.mux.Handle(h.Path, h.Handler)
	}
	for _, h := range cfg.Handlers {
		s.mux.Handle(h.Path, RequireAuth(cfg.Authenticator, h.Handler))
	}
	s.mux.HandleFunc("GET "+HealthPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	if cfg.Gatherer != nil {
		s.mux.Handle("GET "+MetricsPath, promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{}))
	}
	return s, nil
}

// ServeHTTP serves the mux, for tests and embedding without a listener.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Start listens on Config.Addr and serves until Stop.
func (s *Server) Start(ctx context.Context) error {
	return s.life.Start(ctx, func(ctx context.Context, run *lifecycle.Run) error {
		var lc net.ListenConfig
		ln, err := lc.Listen(ctx, "tcp", s.cfg.Addr)
		if err != nil {
			return fmt.Errorf("api server: listen on %s: %w", s.cfg.Addr, err)
		}
		s.addr = ln.Addr()
		srv := &http.Server{
			Handler:           s.mux,
			ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
			ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn),
		}
		served := make(chan struct{})
		run.Go(func(context.Context) {
			defer close(served)
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.cfg.Logger.Error("api server stopped serving", "addr", s.addr.String(), "err", err)
			}
		})
		run.Go(func(runCtx context.Context) {
			<-runCtx.Done()
			// Requests in flight get the grace period; streams that outlive
			// it are cut.
			shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(runCtx), s.cfg.ShutdownGrace)
			defer cancel()
			if err := srv.Shutdown(shutdownCtx); err != nil {
				s.cfg.Logger.Warn("api server: requests cut at shutdown", "err", err)
				_ = srv.Close()
			}
			<-served
		})
		s.cfg.Logger.Info("api server listening", "addr", s.addr.String())
		return nil
	})
}

// Addr is the address the server listens on, once started.
func (s *Server) Addr() net.Addr { return s.addr }

// Stop stops accepting, waits up to Config.ShutdownGrace for requests in
// flight, and returns once the server's goroutines have exited.
func (s *Server) Stop() { s.life.Stop() }
