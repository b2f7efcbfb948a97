package embedded

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/assemble"
	"github.com/sundialhq/sundial/audit"
	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/client"
	"github.com/sundialhq/sundial/dagengine"
	"github.com/sundialhq/sundial/discovery"
	"github.com/sundialhq/sundial/dispatcher"
	"github.com/sundialhq/sundial/enqueue"
	"github.com/sundialhq/sundial/gateway"
	"github.com/sundialhq/sundial/history"
	"github.com/sundialhq/sundial/internal/deps"
	"github.com/sundialhq/sundial/internal/deps/metricdeps"
	"github.com/sundialhq/sundial/internal/lifecycle"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/quota"
	"github.com/sundialhq/sundial/registry"
	"github.com/sundialhq/sundial/runner"
	"github.com/sundialhq/sundial/runner/egress"
	"github.com/sundialhq/sundial/runner/target"
	"github.com/sundialhq/sundial/store/memory"
	"github.com/sundialhq/sundial/trigger"
)

// DefaultShards is the shard count of the embedded cluster: small, because
// one dispatcher owns them all.
const DefaultShards = 8

// Config configures an embedded pipeline.
type Config struct {
	// Shards is S. Default DefaultShards.
	Shards int
	// Handlers are in-process handlers by name, for HandlerTarget jobs.
	Handlers map[string]target.Handler
	// Logger receives the components' logs; nil discards.
	Logger *slog.Logger
	// Registerer receives every component's metrics. Default: a private
	// registry.
	Registerer prometheus.Registerer
	// Now is the clock of every component. Default time.Now.
	Now func() time.Time
	// Teams are the teams whose job topics (sundial.jobs.<team>) are
	// created at start, as `sundial teams create` does on the real stack:
	// the registry reads team topics only, as in production. Default
	// DefaultTeams.
	Teams []string
	// APIAddr, when set, serves the control-plane API there (host:port;
	// port 0 for any), built as `sundial api` builds it (assemble.APIServices),
	// on the in-process backends. The audit trail and the team quotas are
	// kept in memory.
	APIAddr string
	// APITokens are the API's bearer tokens, TEAM:ROLE:SECRET as
	// `sundial api --api-static-token` takes them (TEAM * for the cluster
	// admin). Required with APIAddr. The tokens the API's team service
	// creates (sdl_...) are kept in memory beside them, with the Teams.
	APITokens []string
}

// DefaultTeams are the teams of an embedded pipeline: "dev", the owner of
// the samples, and "examples", the owner of the jobs in docs/examples.
var DefaultTeams = []string{"dev", "examples"}

func (c Config) withDefaults() Config {
	c.Shards = cmp.Or(c.Shards, DefaultShards)
	c.Logger = deps.Logger(c.Logger)
	c.Registerer = metricdeps.Registerer(c.Registerer)
	c.Now = deps.Clock(c.Now)
	if len(c.Teams) == 0 {
		c.Teams = DefaultTeams
	}
	return c
}

// Validate reports every bad field.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Shards < 1 || c.Shards > 1024 {
		errs = append(errs, fmt.Errorf("embedded config: shards %d: must be in [1, 1024]", c.Shards))
	}
	for _, team := range c.Teams {
		if err := topics.ValidTeam(team); err != nil {
			errs = append(errs, fmt.Errorf("embedded config: teams: %w", err))
		}
	}
	if c.APIAddr != "" {
		if len(c.APITokens) == 0 {
			errs = append(errs, errors.New("embedded config: api tokens: required to serve the API"))
		}
		if _, err := apiserver.ParseStaticTokens(c.APITokens); err != nil {
			errs = append(errs, fmt.Errorf("embedded config: api tokens: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Pipeline is a running embedded Sundial.
type Pipeline struct {
	cfg Config

	life lifecycle.Lifecycle
	// metrics is cfg.Registerer, remembering what the components of a run
	// register, so that Stop can unregister it and a later Start register
	// the new components' metrics again.
	metrics *unregistering

	// Set by Start, for the accessors below.
	kafka  *kfake.Cluster
	store  *memory.Store
	client *client.Client
	echo   string
	api    *apiserver.Server
}

// New returns a pipeline that Start brings up.
func New(cfg Config) (*Pipeline, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Pipeline{cfg: cfg, metrics: &unregistering{Registerer: cfg.Registerer}}, nil
}

func (p *Pipeline) names() topics.Names { return topics.Names{} }

// Brokers are the in-process Kafka's addresses (on 127.0.0.1).
func (p *Pipeline) Brokers() []string { return p.kafka.ListenAddrs() }

// Client produces job definitions and triggers to the pipeline.
func (p *Pipeline) Client() *client.Client { return p.client }

// Store is the pipeline's schedule store.
func (p *Pipeline) Store() *memory.Store { return p.store }

// APIURL is the base URL of the control-plane API, when Config.APIAddr
// is set; empty otherwise.
func (p *Pipeline) APIURL() string {
	if p.api == nil {
		return ""
	}
	return "http://" + p.api.Addr().String()
}

// EchoURL is the URL of the built-in echo target: it answers 200 and the
// request body to any method.
func (p *Pipeline) EchoURL() string { return p.echo }

// Start brings up the backends and every component. On error, what was
// started is stopped again. A stopped pipeline may be started again: it
// starts with new, empty backends.
func (p *Pipeline) Start(ctx context.Context) error {
	if err := p.life.Start(ctx, p.start); err != nil {
		return fmt.Errorf("embedded pipeline: %w", err)
	}
	return nil
}

func (p *Pipeline) start(ctx context.Context, run *lifecycle.Run) error {
	cfg := p.cfg
	cfg.Registerer = p.metrics
	run.OnStop(p.metrics.unregisterAll)
	names := p.names()
	log := cfg.Logger

	// Kafka.
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ListenFn(func(network, _ string) (net.Listener, error) {
		return net.Listen(network, "127.0.0.1:0") //nolint:noctx // kfake gives ListenFn no context; the listener lives as long as the cluster
	}))
	if err != nil {
		return fmt.Errorf("start in-process kafka: %w", err)
	}
	p.kafka = kc
	run.OnStop(kc.Close)
	brokers := kc.ListenAddrs()
	if err := ensureTopics(ctx, brokers, names, cfg.Shards, cfg.Teams); err != nil {
		return err
	}

	// Redis.
	mr := miniredis.NewMiniRedis()
	if err := mr.StartAddr("127.0.0.1:0"); err != nil {
		return fmt.Errorf("start in-process redis: %w", err)
	}
	run.OnStop(mr.Close)
	rc := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	run.OnStop(func() { _ = rc.Close() })
	// miniredis keeps no clock of its own: let TTLs follow the wall clock.
	mr.ClockTTL(true)

	// Store.
	st, err := memory.New(memory.Options{Now: cfg.Now})
	if err != nil {
		return fmt.Errorf("in-memory store: %w", err)
	}
	p.store = st
	if _, err := st.InitCluster(ctx, cfg.Shards); err != nil {
		return fmt.Errorf("init cluster: %w", err)
	}

	// Echo target.
	echo, stopEcho, err := startEcho()
	if err != nil {
		return err
	}
	p.echo = echo
	run.OnStop(stopEcho)

	// Enqueuer, shared by registry, trigger consumer, runner and DAG engine.
	enqClient, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.RecordPartitioner(enqueue.Partitioner(names, nil)), kgo.ProducerLinger(0))
	if err != nil {
		return fmt.Errorf("enqueue client: %w", err)
	}
	run.OnStop(enqClient.Close)
	enq, err := enqueue.New(enqueue.Config{Store: st, Client: enqClient, Topics: names, Shards: cfg.Shards, Logger: log, Now: cfg.Now})
	if err != nil {
		return err
	}

	// As in production, the registry and the DAG engine read the team
	// topics only, and the client writes each change to its owner team's
	// topic; a new team's topic is found within a second.
	// Quotas and the audit trail in memory: the registry keeps the
	// per-team job index, the API reads it, and records its changes.
	quotas := quota.NewMemory()
	trail := audit.NewMemory()
	reg, err := registry.New(registry.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(brokers...)}, Topics: names, Store: st, Waker: enq, TopicRefresh: time.Second,
		Quotas: quotas, Registerer: cfg.Registerer, Logger: log.With("component", "registry"), Now: cfg.Now})
	if err != nil {
		return err
	}
	// The DAG engine; its client also publishes its DagRunEvents, as in
	// `sundial dag engine`. The trigger consumer starts the runs of DAGs
	// that triggers name through it.
	dag, err := dagengine.New(dagengine.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(brokers...)}, Topics: names, Store: st, Enqueuer: enq, Producer: enqClient, TopicRefresh: time.Second,
		Shards: cfg.Shards, SessionTimeout: 6 * time.Second,
		Registerer: cfg.Registerer, Logger: log.With("component", "dagengine"), Now: cfg.Now})
	if err != nil {
		return err
	}
	trg, err := trigger.New(trigger.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(brokers...)}, Topics: names, Store: st, Enqueuer: enq, Dags: dag.Runs(),
		Registerer: cfg.Registerer, Logger: log.With("component", "trigger"), Now: cfg.Now})
	if err != nil {
		return err
	}
	// One dispatcher owns every shard; a short session timeout makes a
	// restart of `sundial dev` pick them up at once.
	dsp, err := dispatcher.New(dispatcher.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(brokers...)}, Store: st, Topics: names,
		InstanceID: "dev", SessionTimeout: 6 * time.Second,
		Registerer: cfg.Registerer, Logger: log.With("component", "dispatcher"), Now: cfg.Now})
	if err != nil {
		return err
	}
	// The embedded store keeps no checkpoints and no quotas.
	rnr, err := assemble.Runner(ctx, runner.Config{ID: "dev", Kafka: []kgo.Opt{kgo.SeedBrokers(brokers...)}, Topics: names,
		Handlers: cfg.Handlers, Egress: devEgress(log, append(brokers, mr.Addr())),
		Registerer: cfg.Registerer, Logger: log.With("component", "runner"), Now: cfg.Now},
		assemble.RunnerBackends{Redis: rc, Enqueuer: enq})
	if err != nil {
		return err
	}
	hist, err := history.New(history.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(brokers...)}, Topics: names, History: st,
		Logger: log.With("component", "history")})
	if err != nil {
		return err
	}
	components := []lifecycle.Component{reg, trg, dsp, rnr, hist, dag}
	// With the API, the worker gateway too, so that a team's worker
	// points at the API with a dev token (docs/workers.md). Its runner
	// registers no metrics: the stock runner's are on the registry.
	var workers *gateway.Broker
	if cfg.APIAddr != "" {
		workers, err = gateway.New(gateway.Config{Logger: log.With("component", "gateway"), Now: cfg.Now})
		if err != nil {
			return err
		}
		gw, err := assemble.Gateway(ctx, runner.Config{ID: "dev-gateway", Kafka: []kgo.Opt{kgo.SeedBrokers(brokers...)}, Topics: names,
			Logger: log.With("component", "gateway"), Now: cfg.Now},
			assemble.RunnerBackends{Redis: rc, Enqueuer: enq}, workers)
		if err != nil {
			return err
		}
		components = append(components, gw)
	}
	if err := run.StartAll(ctx, components...); err != nil {
		return err
	}

	cl, err := client.New(client.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(brokers...)}, Topics: names, ByOwner: true, Logger: log.With("component", "client")})
	if err != nil {
		return err
	}
	p.client = cl
	run.OnStop(cl.Close)
	if cfg.APIAddr == "" {
		return nil
	}
	return p.startAPI(ctx, run, apiBackends{brokers: brokers, store: st, producer: enqClient, enqueuer: enq, redis: rc, workers: workers,
		quotas: quotas, audit: trail})
}

// staticOrIssued authenticates a bearer against the static tokens, and one
// they refuse that has the form of Sundial's own tokens (sdl_...) against
// the tokens the API issued.
type staticOrIssued struct {
	static apiserver.Authenticator
	issued apiserver.Authenticator
}

func (a staticOrIssued) Authenticate(ctx context.Context, bearer string) (auth.Principal, error) {
	p, err := a.static.Authenticate(ctx, bearer)
	if err == nil || !strings.HasPrefix(bearer, auth.TokenPrefix) {
		return p, err
	}
	return a.issued.Authenticate(ctx, bearer)
}

// apiBackends are the in-process backends the API is served on.
type apiBackends struct {
	brokers  []string
	store    *memory.Store
	producer *kgo.Client
	enqueuer *enqueue.Enqueuer
	redis    redis.UniversalClient
	workers  *gateway.Broker
	quotas   *quota.Memory
	audit    *audit.Memory
}

// startAPI serves the control-plane API on cfg.APIAddr, built as
// `sundial api` builds it.
func (p *Pipeline) startAPI(ctx context.Context, run *lifecycle.Run, b apiBackends) error {
	cfg, names := p.cfg, p.names()
	log := cfg.Logger
	kopts := []kgo.Opt{kgo.SeedBrokers(b.brokers...)}
	executors, err := discovery.NewDirectory(discovery.DirectoryConfig{Kafka: kopts, Topics: names, Logger: log.With("component", "api-executors")})
	if err != nil {
		return err
	}
	if err := executors.Start(ctx); err != nil {
		return err
	}
	run.OnStop(executors.Stop)
	// The teams and the tokens the team service manages, in memory: the
	// pipeline's teams exist from the start, as `sundial teams create`
	// makes them on the real stack.
	tokenStore := auth.NewMemoryStore()
	for _, team := range cfg.Teams {
		if err := tokenStore.CreateTeam(ctx, auth.Team{Name: team, CreatedAt: cfg.Now().UTC(), CreatedBy: "embedded"}); err != nil {
			return fmt.Errorf("team %s: %w", team, err)
		}
	}
	services, handlers, err := assemble.APIServices(assemble.APIConfig{Topics: names, Shards: cfg.Shards, Now: cfg.Now, Logger: log},
		assemble.APIBackends{Store: b.store, Kafka: kopts, Producer: b.producer, Client: p.client, Enqueuer: b.enqueuer,
			Executors: executors, Redis: b.redis, Workers: b.workers, Quotas: b.quotas, Audit: b.audit, Tokens: tokenStore})
	if err != nil {
		return err
	}
	static, err := apiserver.ParseStaticTokens(cfg.APITokens)
	if err != nil {
		return fmt.Errorf("api tokens: %w", err)
	}
	// No cache: a token revoked through the API is refused at once.
	issued, err := auth.NewTokens(auth.TokensConfig{Store: tokenStore, CacheTTL: -1, Now: cfg.Now})
	if err != nil {
		return err
	}
	authn := staticOrIssued{static: static, issued: issued}
	srv, err := apiserver.New(apiserver.Config{Addr: cfg.APIAddr, Authenticator: authn, Services: services, Handlers: handlers,
		Public: assemble.APIPublic(), Registerer: cfg.Registerer, Logger: log.With("component", "api")})
	if err != nil {
		return fmt.Errorf("api server: %w", err)
	}
	if err := srv.Start(ctx); err != nil {
		return fmt.Errorf("api server: %w", err)
	}
	run.OnStop(srv.Stop)
	p.api = srv
	return nil
}

// Stop stops every component, then the backends. It is idempotent, safe
// before Start, and returns when every goroutine has exited.
func (p *Pipeline) Stop() { p.life.Stop() }

// unregistering is a Registerer that remembers what it registered, so that
// it can unregister all of it: a restarted pipeline builds new components,
// whose metrics would otherwise collide with those of the stopped ones.
type unregistering struct {
	prometheus.Registerer

	mu  sync.Mutex
	got []prometheus.Collector
}

func (u *unregistering) Register(c prometheus.Collector) error {
	if err := u.Registerer.Register(c); err != nil {
		return err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.got = append(u.got, c)
	return nil
}

func (u *unregistering) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := u.Register(c); err != nil {
			panic(err)
		}
	}
}

// unregisterAll unregisters everything registered through u.
func (u *unregistering) unregisterAll() {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, c := range u.got {
		u.Unregister(c)
	}
	u.got = nil
}

func ensureTopics(ctx context.Context, brokers []string, names topics.Names, shards int, teams []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return fmt.Errorf("kafka admin client: %w", err)
	}
	defer cl.Close()
	specs, err := names.Specs(shards)
	if err != nil {
		return err
	}
	for _, team := range teams {
		specs = append(specs, names.TeamJobsSpec(team))
	}
	if _, err := topics.Ensure(ctx, kadm.NewClient(cl), specs, 1); err != nil {
		return fmt.Errorf("create topics: %w", err)
	}
	return nil
}

// devEgress is the egress policy of the embedded runner: every team's HTTP
// targets may reach loopback (the echo target, a developer's own services),
// an opt-out of the default that is logged; the in-process Kafka and Redis
// stay refused.
func devEgress(log *slog.Logger, own []string) egress.Config {
	cfg := egress.LoopbackForEveryTeam()
	for _, a := range own {
		if ap, err := netip.ParseAddrPort(a); err == nil {
			cfg.Own = append(cfg.Own, ap)
		}
	}
	log.Warn("egress: every team's HTTP targets may reach loopback addresses (embedded pipeline, for development only)")
	return cfg
}

// startEcho serves the built-in echo target on 127.0.0.1.
func startEcho() (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") //nolint:noctx // the listener lives until stop, not for one context
	if err != nil {
		return "", nil, fmt.Errorf("echo target: %w", err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", cmp.Or(r.Header.Get("Content-Type"), "text/plain"))
			w.WriteHeader(http.StatusOK)
			_, _ = fmt.Fprintf(w, "echo %s %s idempotency-key=%s\n", r.Method, r.URL.Path, r.Header.Get("Idempotency-Key"))
		}),
		ReadHeaderTimeout: 5 * time.Second,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	return "http://" + ln.Addr().String() + "/echo", func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}
