package apiserver

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/net/netutil"

	"github.com/sundialhq/sundial/internal/deps"
	"github.com/sundialhq/sundial/internal/lifecycle"
	"github.com/sundialhq/sundial/internal/tracing"
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
	// Public are handlers served WITHOUT a token, for content that is the
	// same for everyone and reveals nothing (the web console's static
	// files, package console). Whatever they serve calls the API as any
	// client does, with its own bearer token. Their answers are not
	// counted by the request metrics, as HealthPath's are not.
	Public []Handler
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
	// request headers, and how long a new connection may stay silent.
	// Default 10 s.
	ReadHeaderTimeout time.Duration
	// BodyReadTimeout bounds how long a client may take to send a request
	// body, counted from the end of its headers. It is lifted once the
	// body is read, so that server streams live on. Default
	// DefaultBodyReadTimeout.
	BodyReadTimeout time.Duration
	// IdleTimeout closes a keep-alive connection with no request in flight
	// after this long. Default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxRequestBytes bounds a request body, both as sent and after
	// decompression; a larger one is answered resource_exhausted. Default
	// DefaultMaxRequestBytes.
	MaxRequestBytes int64
	// MaxConnections bounds the open connections; a connection past it
	// waits in the kernel's backlog until one closes. Default
	// DefaultMaxConnections.
	MaxConnections int
	// TLSCertFile and TLSKeyFile, both or neither, serve TLS (HTTP/2 and
	// HTTP/1.1 by ALPN). Without them the port speaks HTTP/1.1 and
	// unencrypted HTTP/2 (h2c), so gRPC clients connect either way.
	TLSCertFile, TLSKeyFile string
	// Now is the clock of the duration metric. Default time.Now.
	Now func() time.Time
	// TracerProvider receives a server span per unary call, continuing
	// the caller's traceparent header (package tracing). Nil: tracing off.
	TracerProvider trace.TracerProvider
}

// Defaults of Config's edge limits.
const (
	// DefaultMaxRequestBytes holds a DAG of about 15,000 nodes; a request
	// larger than this cannot be produced to Kafka anyway.
	DefaultMaxRequestBytes = 4 << 20
	DefaultBodyReadTimeout = 30 * time.Second
	DefaultIdleTimeout     = 2 * time.Minute
	DefaultMaxConnections  = 4096
)

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
	if c.BodyReadTimeout < 0 {
		errs = append(errs, fmt.Errorf("api server config: body read timeout %v: must not be negative", c.BodyReadTimeout))
	}
	if c.IdleTimeout < 0 {
		errs = append(errs, fmt.Errorf("api server config: idle timeout %v: must not be negative", c.IdleTimeout))
	}
	if c.MaxRequestBytes < 0 || c.MaxRequestBytes > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("api server config: max request bytes %d: want 1 to %d", c.MaxRequestBytes, math.MaxInt32))
	}
	if c.MaxConnections < 0 {
		errs = append(errs, fmt.Errorf("api server config: max connections %d: must not be negative", c.MaxConnections))
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		errs = append(errs, fmt.Errorf("api server config: tls cert file %q, tls key file %q: set both or neither", c.TLSCertFile, c.TLSKeyFile))
	}
	for i, h := range c.Handlers {
		if h.Path == "" || h.Handler == nil {
			errs = append(errs, fmt.Errorf("api server config: handlers[%d]: path and handler are required", i))
		}
	}
	for i, h := range c.Public {
		if h.Path == "" || h.Handler == nil {
			errs = append(errs, fmt.Errorf("api server config: public[%d]: path and handler are required", i))
		}
	}
	return errors.Join(errs...)
}

// Server serves the control-plane API: every service on one mux, so that
// one port answers gRPC, gRPC-Web and HTTP/JSON.
type Server struct {
	cfg     Config
	mux     *http.ServeMux
	handler http.Handler
	// public are the mux patterns of Config.Public, served without a
	// token.
	public  map[string]bool
	tls     *tls.Config
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
	cfg.BodyReadTimeout = cmp.Or(cfg.BodyReadTimeout, DefaultBodyReadTimeout)
	cfg.IdleTimeout = cmp.Or(cfg.IdleTimeout, DefaultIdleTimeout)
	cfg.MaxRequestBytes = cmp.Or(cfg.MaxRequestBytes, DefaultMaxRequestBytes)
	cfg.MaxConnections = cmp.Or(cfg.MaxConnections, DefaultMaxConnections)
	cfg.Now = deps.Clock(cfg.Now)
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	m, err := newMetrics(cfg.Registerer, cfg.Now)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), metrics: m, public: map[string]bool{}}
	if cfg.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("api server config: tls cert file %s, key file %s: %w", cfg.TLSCertFile, cfg.TLSKeyFile, err)
		}
		s.tls = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	// The metrics interceptor runs first, so that refused requests are
	// counted too.
	codecs := []connect.HandlerOption{
		connect.WithCodec(strictJSON{name: "json"}),
		connect.WithCodec(strictJSON{name: "json; charset=utf-8"}),
	}
	opts := append([]connect.HandlerOption{
		connect.WithInterceptors(m.interceptor(), tracingInterceptor{tracing.Tracer(cfg.TracerProvider)}, NewAuthInterceptor(cfg.Authenticator)),
		connect.WithReadMaxBytes(int(cfg.MaxRequestBytes)),
	}, codecs...)
	for _, svc := range cfg.Services {
		h := svc(opts...)
		s.mux.Handle(h.Path, h.Handler)
	}
	for _, h := range cfg.Handlers {
		s.mux.Handle(h.Path, RequireAuth(cfg.Authenticator, h.Handler))
	}
	for _, h := range cfg.Public {
		s.mux.Handle(h.Path, h.Handler)
		s.public[h.Path] = true
	}
	s.mux.HandleFunc("GET "+HealthPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	if cfg.Gatherer != nil {
		s.mux.Handle("GET "+MetricsPath, promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{}))
	}
	s.handler = &edge{
		authn: cfg.Authenticator, metrics: m, mux: s.mux, errw: connect.NewErrorWriter(codecs...), open: s.isOpen,
		// The raw body also carries the envelope of each message.
		maxBytes: cfg.MaxRequestBytes + 1024, bodyTime: cfg.BodyReadTimeout, now: cfg.Now, next: s.mux,
	}
	return s, nil
}

// isOpen reports whether r is for one of the paths that need no token.
// A public handler's paths are open exactly when the mux routes the
// request to it, so that no other path is opened by a prefix that merely
// looks alike.
func (s *Server) isOpen(r *http.Request) bool {
	if r.URL.Path == HealthPath || (s.cfg.Gatherer != nil && r.URL.Path == MetricsPath) {
		return true
	}
	if len(s.public) == 0 {
		return false
	}
	_, pattern := s.mux.Handler(r)
	return s.public[pattern]
}

// ServeHTTP serves what the listener serves, for tests and embedding
// without a listener.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Start listens on Config.Addr and serves until Stop.
func (s *Server) Start(ctx context.Context) error {
	return s.life.Start(ctx, func(ctx context.Context, run *lifecycle.Run) error {
		var lc net.ListenConfig
		ln, err := lc.Listen(ctx, "tcp", s.cfg.Addr)
		if err != nil {
			return fmt.Errorf("api server: listen on %s: %w", s.cfg.Addr, err)
		}
		s.addr = ln.Addr()
		ln = netutil.LimitListener(ln, s.cfg.MaxConnections)
		var protocols http.Protocols
		protocols.SetHTTP1(true)
		protocols.SetHTTP2(true)
		// gRPC needs HTTP/2; without TLS it is h2c, with prior knowledge.
		protocols.SetUnencryptedHTTP2(s.tls == nil)
		srv := &http.Server{
			Handler:           s.handler,
			ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
			// No ReadTimeout: it would cut server streams. The edge
			// bounds the body instead (BodyReadTimeout).
			IdleTimeout: s.cfg.IdleTimeout,
			Protocols:   &protocols,
			TLSConfig:   s.tls,
			ErrorLog:    slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn),
		}
		served := make(chan struct{})
		run.Go(func(context.Context) {
			defer close(served)
			serve := func() error { return srv.Serve(ln) }
			if s.tls != nil {
				serve = func() error { return srv.ServeTLS(ln, "", "") }
			}
			if err := serve(); err != nil && !errors.Is(err, http.ErrServerClosed) {
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
		s.cfg.Logger.Info("api server listening", "addr", s.addr.String(), "tls", s.tls != nil)
		return nil
	})
}

// Addr is the address the server listens on, once started.
func (s *Server) Addr() net.Addr { return s.addr }

// Stop stops accepting, waits up to Config.ShutdownGrace for requests in
// flight, and returns once the server's goroutines have exited.
func (s *Server) Stop() { s.life.Stop() }
