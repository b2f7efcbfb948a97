package worker

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/assemble"
	"github.com/sundialhq/sundial/enqueue"
	"github.com/sundialhq/sundial/internal/deps"
	"github.com/sundialhq/sundial/internal/lifecycle"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/jobspec"
	"github.com/sundialhq/sundial/runner"
	"github.com/sundialhq/sundial/runner/target"
	"github.com/sundialhq/sundial/store/cassandra"
)

// DefaultPool is the pool of the stock runners.
const DefaultPool = "default"

// handlerName is what a handler may be registered as: the characters a
// job's target.handler.name may hold.
var handlerName = regexp.MustCompile(`^[A-Za-z0-9._:/-]+$`)

// Config configures a Worker, in one of two modes. A team's worker sets
// APIURL and Token only: it polls the API's worker gateway for its team's
// runs of its handlers and holds no backend credential (remote.go). An
// in-process worker of the installation sets Kafka, RedisAddr and
// CassandraHosts instead and is a runner itself. Every other zero field
// means its default.
type Config struct {
	// APIURL is the base URL of the control-plane API (`sundial api`,
	// `sundial dev`), http or https: the worker talks to its worker
	// gateway only. Set it, or the backends below, not both.
	APIURL string
	// Token is the team's bearer token (role operator or admin): the
	// worker receives its team's runs only. Required with APIURL.
	Token string
	// TLSCAFile is a PEM bundle of the CAs the API's certificate is
	// checked against (a private CA); it replaces TLS's RootCAs. Setting
	// api-tls-ca-file.
	TLSCAFile string
	// TLSCertFile and TLSKeyFile are the worker's PEM client certificate
	// and key, for mutual TLS with the API; both or neither. Settings
	// api-tls-cert-file and api-tls-key-file.
	TLSCertFile string
	TLSKeyFile  string
	// TLSServerName is the name the API's certificate must carry; empty
	// means the host of APIURL. Setting api-tls-server-name.
	TLSServerName string
	// TLS configures the API's TLS beyond the fields above; nil is Go's
	// default.
	TLS *tls.Config
	// HTTPClient, when set, makes the API calls instead of a client built
	// from TLS and the TLS files.
	HTTPClient *http.Client

	// Pool is the pool whose jobs' handler runs the worker executes (a
	// job's "pool"; [a-z0-9_-], at most 64 characters). Default
	// DefaultPool. A team's worker receives only the runs of its team's
	// jobs of this pool, for the handlers it registered; the workers of
	// one pool may register different handlers. An in-process worker
	// also joins the pool's consumer group on the runs topics
	// (DefaultPool: the stock runners' group runner.DefaultGroup, any
	// other name "sundial-runners-<pool>"), and executes handler runs of
	// its pool only (others are routed to an executor of theirs).
	Pool string
	// ID names this worker in run events. Default "<hostname>-<pid>".
	ID string
	// Kafka are the options of every Kafka client of the worker: the seed
	// brokers (kgo.SeedBrokers, required) and the connection's TLS and
	// SASL.
	Kafka []kgo.Opt
	// TopicPrefix starts every topic name; the installation's
	// --topic-prefix.
	TopicPrefix string
	// RedisAddr is the Redis of the leases, host:port; several,
	// comma-separated, are the seeds of a Redis Cluster. Required.
	RedisAddr string
	// RedisKeyPrefix is the installation's --redis-key-prefix.
	RedisKeyPrefix string
	// CassandraHosts are the contact points of the store, where retries
	// are written. Required.
	CassandraHosts []string
	// Keyspace is the store's keyspace. Default cassandra.DefaultKeyspace.
	Keyspace string
	// Concurrency is how many runs execute at once. Default 16: handlers
	// often use the CPU, unlike the stock runner's HTTP calls.
	Concurrency int
	// PoolSlots and PoolBlocking are the pool's slots on this worker and
	// what a run that finds them busy does (runner.Config). Defaults
	// Concurrency and runner.BlockingConcurrent.
	PoolSlots    int
	PoolBlocking runner.PoolBlocking
	// Labels and Version describe the worker in its announcements on
	// sundial.executors.
	Labels  map[string]string
	Version string
	// Tune, when set, changes the runner's configuration after the worker
	// filled it in: timeouts, breakers, the lease TTL's neighbours.
	Tune func(*runner.Config)
	// Registerer receives the runner's metrics. Nil registers nothing.
	Registerer prometheus.Registerer
	// Logger receives the worker's logs and every handler's run log lines;
	// nil discards.
	Logger *slog.Logger
}

// DefaultConcurrency is the default Config.Concurrency.
const DefaultConcurrency = 16

// Group returns the consumer group of pool.
func Group(pool string) string {
	if pool == "" || pool == DefaultPool {
		return runner.DefaultGroup
	}
	return runner.DefaultGroup + "-" + pool
}

// Validate reports every bad field.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("worker config: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	switch {
	case c.APIURL != "":
		if u, err := url.Parse(c.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("APIURL", "%q: want an http or https URL", c.APIURL)
		}
		if strings.TrimSpace(c.Token) == "" {
			bad("Token", "is required with APIURL (the team's token)")
		}
		if len(c.Kafka) > 0 || c.RedisAddr != "" || len(c.CassandraHosts) > 0 {
			bad("APIURL", "a worker of the API holds no backend: leave Kafka, RedisAddr and CassandraHosts empty")
		}
	default:
		if len(c.Kafka) == 0 {
			bad("Kafka", "the seed brokers (kgo.SeedBrokers) are required (or APIURL and Token)")
		}
		if strings.TrimSpace(c.RedisAddr) == "" {
			bad("RedisAddr", "is required (or APIURL and Token)")
		}
		if len(c.CassandraHosts) == 0 {
			bad("CassandraHosts", "at least one host is required (or APIURL and Token)")
		}
	}
	if why := jobspec.CheckPool(c.Pool); why != "" {
		bad("Pool", "%s", why)
	}
	if c.Concurrency < 0 {
		bad("Concurrency", "%d is negative", c.Concurrency)
	}
	return errors.Join(errs...)
}

// Worker is a runner that executes the handlers registered on it, besides
// the HTTP and Kafka targets every runner executes. Register handlers with
// Handle, then Start.
type Worker struct {
	cfg  Config
	life lifecycle.Lifecycle

	mu       sync.Mutex
	handlers map[string]target.Handler
}

// New returns a Worker, or the configuration's errors.
func New(cfg Config) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Logger = deps.Logger(cfg.Logger)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, DefaultConcurrency)
	cfg.Keyspace = cmp.Or(cfg.Keyspace, cassandra.DefaultKeyspace)
	if cfg.ID == "" {
		host, _ := os.Hostname()
		cfg.ID = cmp.Or(host, "worker") + "-" + strconv.Itoa(os.Getpid())
	}
	return &Worker{cfg: cfg, handlers: map[string]target.Handler{}}, nil
}

// Handle registers fn for runs whose target is the handler name. It panics
// when name is not a valid handler name, when fn is nil, or when name is
// already registered (as http.ServeMux does: these are programming errors).
// Handlers registered after Start serve from the next Start.
func (w *Worker) Handle(name string, fn Handler) {
	if !handlerName.MatchString(name) {
		panic(fmt.Sprintf("worker: handler name %q: must match [A-Za-z0-9._:/-]+", name))
	}
	if fn == nil {
		panic(fmt.Sprintf("worker: handler %q: nil function", name))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, dup := w.handlers[name]; dup {
		panic(fmt.Sprintf("worker: handler %q: registered twice", name))
	}
	w.handlers[name] = handler{fn: fn, logger: w.cfg.Logger}
}

// Start connects to Kafka, Redis and Cassandra and starts consuming runs.
// ctx bounds the start only. The runner's metrics are registered on
// Config.Registerer at each Start, so a Worker is started once per
// registry.
func (w *Worker) Start(ctx context.Context) error {
	return w.life.Start(ctx, func(ctx context.Context, run *lifecycle.Run) error {
		if w.cfg.APIURL != "" {
			return w.startRemote(run)
		}
		c := w.cfg
		names := topics.Names{Prefix: c.TopicPrefix}
		st, err := cassandra.Open(ctx, cassandra.Config{Hosts: c.CassandraHosts, Keyspace: c.Keyspace})
		if err != nil {
			return fmt.Errorf("worker: cassandra: %w", err)
		}
		run.OnStop(func() { _ = st.Close() })
		cluster, err := st.GetClusterConfig(ctx)
		if err != nil {
			return fmt.Errorf("worker: cassandra: %w", err)
		}
		wake, err := kgo.NewClient(append(slices.Clone(c.Kafka),
			kgo.RecordPartitioner(enqueue.Partitioner(names, nil)))...)
		if err != nil {
			return fmt.Errorf("worker: kafka: %w", err)
		}
		run.OnStop(wake.Close)
		enq, err := enqueue.New(enqueue.Config{Store: st, Client: wake, Topics: names, Shards: cluster.Shards, Logger: c.Logger})
		if err != nil {
			return fmt.Errorf("worker: %w", err)
		}
		addrs := strings.Split(c.RedisAddr, ",")
		for i := range addrs {
			addrs[i] = strings.TrimSpace(addrs[i])
		}
		rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: addrs, PoolSize: c.Concurrency, IsClusterMode: len(addrs) > 1})
		run.OnStop(func() { _ = rdb.Close() })
		w.mu.Lock()
		handlers := maps.Clone(w.handlers)
		w.mu.Unlock()
		rc := runner.Config{
			ID:           c.ID,
			Kafka:        c.Kafka,
			Topics:       names,
			Group:        names.Group(Group(c.Pool)),
			Handlers:     handlers,
			Concurrency:  c.Concurrency,
			Pool:         cmp.Or(c.Pool, DefaultPool),
			PoolSlots:    c.PoolSlots,
			PoolBlocking: c.PoolBlocking,
			Labels:       c.Labels,
			Version:      c.Version,
			Registerer:   c.Registerer,
			Logger:       c.Logger,
		}
		if c.Tune != nil {
			c.Tune(&rc)
		}
		// Built as `sundial runner` builds it (package assemble).
		r, err := assemble.Runner(ctx, rc, assemble.RunnerBackends{Redis: rdb, RedisKeyPrefix: c.RedisKeyPrefix,
			Enqueuer: enq, Checkpoints: st, Quotas: st})
		if err != nil {
			return fmt.Errorf("worker: %w", err)
		}
		if err := r.Start(ctx); err != nil {
			return fmt.Errorf("worker: %w", err)
		}
		run.OnStop(r.Stop)
		return nil
	})
}

// Stop stops consuming, lets executing runs finish (the runner's
// ShutdownTimeout) and closes the connections. Idempotent; safe before
// Start.
func (w *Worker) Stop() { w.life.Stop() }

// Run starts the worker, waits for ctx to end, and stops it: the whole
// life of a worker program's main.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	w.Stop()
	return nil
}
