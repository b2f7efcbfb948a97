package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/assemble"
	"github.com/sundialhq/sundial/audit"
	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/client"
	"github.com/sundialhq/sundial/console"
	"github.com/sundialhq/sundial/discovery"
	"github.com/sundialhq/sundial/enqueue"
	"github.com/sundialhq/sundial/gateway"
	"github.com/sundialhq/sundial/internal/lifecycle"
	"github.com/sundialhq/sundial/internal/telemetry"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/runner"
	"github.com/sundialhq/sundial/store/cassandra"
)

func apiCommand() *cli.Command {
	return &cli.Command{
		Name:  "api",
		Usage: "serve the control-plane API (gRPC, gRPC-Web and HTTP/JSON on one port)",
		Description: `Serves the services of proto/sundial/api/v1 with Connect: gRPC, gRPC-Web and
HTTP/JSON from one handler. Reads go to Cassandra; changes are produced to
sundial.jobs and answered by the registry (jobs) or the DAG engine (DAGs),
which must be running. The server keeps no state: run several side by side.

Every call needs "Authorization: Bearer <token>": a team token made with
'sundial tokens create' (kept hashed in Cassandra), a JWT of the OpenID
provider given with --oidc-issuer, or, for development only, a token given
with --api-static-token TEAM:ROLE:SECRET (TEAM "*" for the cluster admin;
the secret sits in the configuration in clear). See docs/api.md.

Example, against the local stack:
  source <(deploy/local/stack.sh env)
  sundial api --listen 127.0.0.1:8480 --api-static-token data:admin:dev-secret`,
		Flags: append(append(append(append(append(append(kafkaFlags(), cassandraStoreFlags()...), processFlags()...), authFlags()...), redisFlags()...), redisPrefixFlag()),
			&cli.DurationFlag{Name: "audit-retention", Value: audit.DefaultRetention, Usage: "how long the audit trail keeps the records of the API's changes and operator actions", Sources: envVar("audit-retention")},
			&cli.BoolFlag{Name: "worker-gateway", Usage: "host the worker gateway: the teams' workers (package worker with an API URL and a team token) poll this API for their team's handler runs; needs --redis-addr (the leases)", Sources: envVar("worker-gateway")},
			&cli.BoolFlag{Name: "console", Value: true, Usage: "serve the web console under /console/ and redirect / to it; =false: those paths answer 404 and the API is unchanged", Sources: envVar("console")},
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:8480", Usage: "address to serve the API on, host:port", Sources: envVar("listen")},
			&cli.StringSliceFlag{Name: "api-static-token", Usage: "a token TEAM:ROLE:SECRET (repeatable; TEAM * is the cluster admin; ROLE viewer, operator or admin); for development only", Sources: envVar("api-static-token")},
			&cli.DurationFlag{Name: "answer-timeout", Value: 30 * time.Second, Usage: "how long an apply or delete waits for the registry's answer", Sources: envVar("answer-timeout")},
			&cli.BoolFlag{Name: "jobs-shared-topic", Usage: "produce changes to the shared sundial.jobs, as before team topics, while the registry still reads it (--jobs-shared-topic=true there too; the move to team topics only); default: each change to its owner team's topic sundial.jobs.<team>", Sources: envVar("jobs-shared-topic")},
			&cli.DurationFlag{Name: "shutdown-grace", Value: 10 * time.Second, Usage: "how long requests in flight may finish after a stop signal", Sources: envVar("shutdown-grace")},
			&cli.StringFlag{Name: "tls-cert-file", Usage: "PEM certificate (chain) to serve the API over TLS, HTTP/2 and HTTP/1.1; with --tls-key-file (default: no TLS, HTTP/1.1 and h2c)", Sources: envVar("tls-cert-file")},
			&cli.StringFlag{Name: "tls-key-file", Usage: "PEM private key of --tls-cert-file", Sources: envVar("tls-key-file")},
			&cli.Int64Flag{Name: "api-max-request-bytes", Value: apiserver.DefaultMaxRequestBytes, Usage: "largest request body the API reads, as sent and after decompression; a larger one is answered resource_exhausted", Sources: envVar("api-max-request-bytes")},
			&cli.DurationFlag{Name: "api-body-read-timeout", Value: apiserver.DefaultBodyReadTimeout, Usage: "how long a client may take to send a request body; a slower one is cut", Sources: envVar("api-body-read-timeout")},
			&cli.DurationFlag{Name: "api-read-header-timeout", Value: 10 * time.Second, Usage: "how long a client may take to send its request headers, and a new connection may stay silent", Sources: envVar("api-read-header-timeout")},
			&cli.DurationFlag{Name: "api-idle-timeout", Value: apiserver.DefaultIdleTimeout, Usage: "how long a keep-alive connection with no request in flight stays open", Sources: envVar("api-idle-timeout")},
			&cli.IntFlag{Name: "api-max-connections", Value: apiserver.DefaultMaxConnections, Usage: "most connections the API holds open; more wait to be accepted", Sources: envVar("api-max-connections")},
			&cli.IntFlag{Name: "api-max-watches-per-caller", Value: apiserver.DefaultMaxWatchesPerCaller, Usage: "most watch streams (WatchEvents, WatchRuns, the SSE stream) one caller holds open at once", Sources: envVar("api-max-watches-per-caller")},
			&cli.IntFlag{Name: "api-max-watches", Value: apiserver.DefaultMaxWatches, Usage: "most watch streams the server holds open at once, every caller together", Sources: envVar("api-max-watches")},
		),
		Action: runAPI,
	}
}

// apiAuthenticator is the one place the API's Authenticator is chosen from
// the flags: the static development tokens, when given, are tried first,
// then the team token store and OIDC (auth.Chain).
// It also returns the web console's sign-in with the OIDC issuer, nil when
// --oidc-console-client-id is not set.
func apiAuthenticator(ctx context.Context, cmd *cli.Command, store auth.TokenStore, reg prometheus.Registerer) (apiserver.Authenticator, *console.SignIn, error) {
	chain, signIn, err := newAuthenticatorAndSignIn(ctx, cmd, store, reg)
	if err != nil {
		return nil, nil, err
	}
	specs := cmd.StringSlice("api-static-token")
	if len(specs) == 0 {
		return chain, signIn, nil
	}
	static, err := apiserver.ParseStaticTokens(specs)
	if err != nil {
		return nil, nil, fmt.Errorf("--api-static-token: %w", err)
	}
	return staticThenChain{static: static, chain: chain}, signIn, nil
}

// staticThenChain accepts a development token given on the command line,
// and hands every other bearer to the token store and OIDC.
type staticThenChain struct {
	static apiserver.Authenticator
	chain  apiserver.Authenticator
}

func (a staticThenChain) Authenticate(ctx context.Context, bearer string) (auth.Principal, error) {
	if p, err := a.static.Authenticate(ctx, bearer); err == nil {
		return p, nil
	}
	return a.chain.Authenticate(ctx, bearer)
}

func runAPI(ctx context.Context, cmd *cli.Command) error {
	kopts, cc, p, bad := serverFlags(ctx, cmd, "api")
	if _, err := apiserver.ParseStaticTokens(cmd.StringSlice("api-static-token")); err != nil {
		bad = append(bad, fmt.Errorf("--api-static-token: %w", err))
	}
	if !cmd.Bool("console") && cmd.String("oidc-console-client-id") != "" {
		bad = append(bad, errors.New("--oidc-console-client-id: names the web console's client at the provider, but --console=false turns the console off"))
	}
	if cmd.Bool("worker-gateway") && cmd.String("redis-addr") == "" && cmd.String("redis-sentinel-master") == "" {
		bad = append(bad, errors.New("--worker-gateway: needs --redis-addr (or --redis-sentinel-master): the gateway holds its runs' leases"))
	}
	if err := errors.Join(bad...); err != nil {
		return err
	}
	names := topics.Names{Prefix: cmd.String("topic-prefix")}
	if err := checkKafka(ctx, kopts); err != nil {
		return err
	}
	if err := p.instrumentCassandra(&cc); err != nil {
		return err
	}
	openCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	st, err := cassandra.Open(openCtx, cc)
	if err != nil {
		return fmt.Errorf("cassandra: %w", err)
	}
	defer func() { _ = st.Close() }()
	producer, err := kgo.NewClient(withKafka(kopts, p.kafkaMetrics("api"))...)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	defer producer.Close()
	// ByOwner: every change goes to its owner team's topic, the only
	// definitions a registry reads by default.
	shared := cmd.Bool("jobs-shared-topic")
	if shared {
		p.logger.Warn("changes go to the shared topic: whoever may write it may change any team's job", "shared_topic", names.Jobs())
	}
	cl, err := client.New(client.Config{Kafka: kopts, Topics: names, ByOwner: !shared, Logger: p.named("client")})
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := errors.Join(
		p.check("cassandra", st.Ping),
		p.check("kafka", telemetry.KafkaCheck(producer)),
	); err != nil {
		return err
	}

	authn, signIn, err := apiAuthenticator(ctx, cmd, st, p.reg)
	if err != nil {
		return err
	}
	cluster, err := st.GetClusterConfig(ctx)
	if err != nil {
		return fmt.Errorf("cassandra: %w", err)
	}
	enqClient, err := kgo.NewClient(withKafka(kopts, kgo.RecordPartitioner(enqueue.Partitioner(names, nil)))...)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	defer enqClient.Close()
	enq, err := enqueue.New(enqueue.Config{Store: st, Client: enqClient, Topics: names, Shards: cluster.Shards, Registerer: p.reg, Logger: p.named("enqueue")})
	if err != nil {
		return err
	}
	// The cluster view's executors: a Directory of sundial.executors, read
	// for as long as the server runs.
	executors, err := discovery.NewDirectory(discovery.DirectoryConfig{Kafka: kopts, Topics: names, Logger: p.named("api-executors")})
	if err != nil {
		return err
	}
	backends := assemble.APIBackends{
		Store: st, Audit: st, Quotas: st, Tokens: st, Kafka: kopts, Producer: producer, Client: cl, Enqueuer: enq, Executors: executors,
	}
	// With Redis (--redis-addr), cancelling runs, backfills and the count
	// of concurrent runs are served; without, those answer that Redis is
	// needed.
	if cmd.String("redis-addr") != "" || cmd.String("redis-sentinel-master") != "" {
		rdb, err := redisClient(cmd, 8)
		if err != nil {
			return err
		}
		defer func() { _ = rdb.Close() }()
		if err := checkRedis(ctx, rdb); err != nil {
			return err
		}
		backends.Redis, backends.RedisKeyPrefix = rdb, cmd.String("redis-key-prefix")
	}
	var components []lifecycle.Component
	if cmd.Bool("worker-gateway") {
		broker, err := gateway.New(gateway.Config{Logger: p.named("gateway"), Registerer: p.reg})
		if err != nil {
			return err
		}
		gw, err := assemble.Gateway(ctx, runner.Config{ID: gatewayID(), Kafka: kopts, Topics: names, TracerProvider: p.tracerProvider(), EventEncoding: p.encoding,
			Registerer: p.reg, Logger: p.named("gateway")},
			assemble.RunnerBackends{Redis: backends.Redis, RedisKeyPrefix: backends.RedisKeyPrefix, Enqueuer: enq, Checkpoints: st, Quotas: st}, broker)
		if err != nil {
			return fmt.Errorf("worker gateway: %w", err)
		}
		backends.Workers = broker
		components = append(components, gw)
	}
	services, handlers, err := assemble.APIServices(assemble.APIConfig{
		Topics: names, Shards: cluster.Shards, AnswerTimeout: cmd.Duration("answer-timeout"),
		AuditRetention:      cmd.Duration("audit-retention"),
		MaxWatchesPerCaller: cmd.Int("api-max-watches-per-caller"), MaxWatches: cmd.Int("api-max-watches"),
		Logger: p.base,
	}, backends)
	if err != nil {
		return err
	}
	public := assemble.APIPublicConsoleOff()
	if cmd.Bool("console") {
		if public, err = assemble.APIPublicWithSignIn(signIn); err != nil {
			return err
		}
	}
	srv, err := apiserver.New(apiserver.Config{
		Addr: cmd.String("listen"), Authenticator: authn, TracerProvider: p.tracerProvider(),
		Services:      services,
		Handlers:      handlers,
		Public:        public,
		ShutdownGrace: cmd.Duration("shutdown-grace"),
		TLSCertFile:   cmd.String("tls-cert-file"), TLSKeyFile: cmd.String("tls-key-file"),
		MaxRequestBytes: cmd.Int64("api-max-request-bytes"), BodyReadTimeout: cmd.Duration("api-body-read-timeout"),
		ReadHeaderTimeout: cmd.Duration("api-read-header-timeout"), IdleTimeout: cmd.Duration("api-idle-timeout"),
		MaxConnections: cmd.Int("api-max-connections"),
		Registerer:     p.reg, Logger: p.logger,
	})
	if err != nil {
		return fmt.Errorf("api server (--listen, --tls-*, --api-*): %w", err)
	}
	return p.run(ctx, append([]lifecycle.Component{executors}, append(components, srv)...)...)
}

// gatewayID names the worker gateway's runner: its directed topic and its
// run events.
func gatewayID() string {
	host, _ := os.Hostname()
	return "gateway-" + cmp.Or(host, "api") + "-" + strconv.Itoa(os.Getpid())
}
