package assemble

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/audit"
	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/client"
	"github.com/sundialhq/sundial/console"
	"github.com/sundialhq/sundial/dagengine"
	"github.com/sundialhq/sundial/discovery"
	"github.com/sundialhq/sundial/dispatcher"
	"github.com/sundialhq/sundial/enqueue"
	"github.com/sundialhq/sundial/gateway"
	"github.com/sundialhq/sundial/history"
	"github.com/sundialhq/sundial/internal/deps"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/leasing"
	"github.com/sundialhq/sundial/logtail"
	"github.com/sundialhq/sundial/operator"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	"github.com/sundialhq/sundial/quota"
	"github.com/sundialhq/sundial/registry"
	"github.com/sundialhq/sundial/runner"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/trigger"
)

// APIStore is what the API's services read: definitions, DAGs, run
// history, DAG runs, the shards and the schedule's buckets (the
// forecast); the one history write, the scheduled attempt of a retried
// run (operator.Retry); and the DAG runs a resume changes
// (dagengine.Store). *cassandra.Store and *memory.Store are
// ones.
type APIStore interface {
	apiserver.JobStore
	apiserver.DagStore
	apiserver.RunHistory
	store.RunIndex
	apiserver.DagRunReader
	dagengine.Store
	apiserver.ShardReader
	operator.History
	operator.Due
}

// APIBackends are the open clients the API's services are built on. The
// caller owns and closes every one of them.
type APIBackends struct {
	// Store is read by every service. Required.
	Store APIStore
	// Audit keeps the audit trail; nil when the store has none (the
	// embedded store): changes are then not recorded and the audit service
	// is not served.
	Audit audit.Store
	// Quotas holds the teams' quotas; nil when the store has none: the
	// quota service is not served.
	Quotas quota.Store
	// Tokens keeps the teams and the API's tokens; with Quotas (which
	// counts a team's jobs, so that a team owning one is not deleted) the
	// team service is served. Nil serves none: teams and tokens are then
	// managed by the bootstrap CLI only.
	Tokens auth.TokenStore
	// Kafka are the options of the installation's Kafka (seeds, TLS,
	// SASL), for the readers the services open. Required.
	Kafka []kgo.Opt
	// Producer publishes the audit trail and answers the cluster view's
	// admin requests. Required.
	Producer *kgo.Client
	// Client produces the changes (jobs, DAGs, triggers) and reads the
	// registry's answers. Required.
	Client *client.Client
	// Enqueuer writes the runs of triggers, backfills and replays.
	// Required.
	Enqueuer *enqueue.Enqueuer
	// Executors is the directory of live executors, for the cluster view
	// and the load of a BROADCAST job. Required; the caller starts it.
	Executors *discovery.Directory
	// Redis holds the leases and the runners' live logs; nil when the
	// installation gives none: cancelling runs, backfills, the count of
	// concurrent runs and live log tails answer that Redis is needed.
	Redis redis.UniversalClient
	// RedisKeyPrefix starts every Redis key of the installation.
	RedisKeyPrefix string
	// Workers is the broker of the worker gateway hosted with the API
	// (package gateway; its runner is built by Gateway): when set, the
	// WorkerService is served, for the teams' workers. Nil serves none.
	Workers *gateway.Broker
}

// APIConfig are the plain settings of the API's services.
type APIConfig struct {
	// Topics names the installation's topics.
	Topics topics.Names
	// Shards is the cluster's shard count S. Required.
	Shards int
	// AnswerTimeout bounds the wait for the registry's answer to a change;
	// zero for the services' default.
	AnswerTimeout time.Duration
	// AuditRetention is how long the audit trail keeps a record; zero for
	// audit.DefaultRetention.
	AuditRetention time.Duration
	// MaxWatchesPerCaller and MaxWatches bound the watch streams; zero for
	// the services' defaults.
	MaxWatchesPerCaller, MaxWatches int
	// Now is the services' clock. Default time.Now.
	Now func() time.Time
	// Logger receives the services' logs; nil discards.
	Logger *slog.Logger
}

// APIServices builds every service of the control-plane API, and the
// server-sent-events stream of the watch service, from cfg and b. The
// caller serves them with apiserver.New; it opens and starts nothing.
// `sundial api` and the embedded pipeline both call it, so `sundial dev`
// serves the API that ships.
func APIServices(cfg APIConfig, b APIBackends) ([]apiserver.Service, []apiserver.Handler, error) {
	if err := checkAPI(cfg, b); err != nil {
		return nil, nil, err
	}
	cfg.Now = deps.Clock(cfg.Now)
	cfg.Logger = deps.Logger(cfg.Logger)
	named := func(name string) *slog.Logger { return cfg.Logger.With("component", name) }

	var trail *audit.Trail
	if b.Audit != nil {
		t, err := audit.New(audit.Config{Store: b.Audit, Producer: b.Producer, Topic: cfg.Topics.Audit(), Retention: cfg.AuditRetention})
		if err != nil {
			return nil, nil, fmt.Errorf("audit retention: %w", err)
		}
		trail = t
	}
	jobsCfg := apiserver.JobServiceConfig{Store: b.Store, Writer: b.Client, AnswerTimeout: cfg.AnswerTimeout, Logger: named("api-jobs")}
	if trail != nil {
		jobsCfg.Audit = trail
	}
	jobs, err := apiserver.NewJobService(jobsCfg)
	if err != nil {
		return nil, nil, err
	}
	// ResumeDagRun calls the code `sundial dag resume` calls.
	dagRuns, err := dagengine.NewRuns(dagengine.RunsConfig{
		Store: b.Store, Enqueuer: b.Enqueuer, Producer: b.Producer, Topics: cfg.Topics, Shards: cfg.Shards,
		Now: cfg.Now, Logger: named("api-dags"),
	})
	if err != nil {
		return nil, nil, err
	}
	dagsCfg := apiserver.DagServiceConfig{
		Store: b.Store, Writer: apiserver.KafkaDagWriter{Client: b.Client}, AnswerTimeout: cfg.AnswerTimeout,
		Runs: dagRuns, Now: cfg.Now, Logger: named("api-dags"),
	}
	if trail != nil {
		dagsCfg.Audit = trail
	}
	dags, err := apiserver.NewDagService(dagsCfg)
	if err != nil {
		return nil, nil, err
	}
	services := []apiserver.Service{jobs.Service(), dags.Service(), apiserver.IdentityService{}.Service()}
	runs, handlers, err := runServices(cfg, b, named)
	if err != nil {
		return nil, nil, err
	}
	control, err := controlServices(cfg, b, trail, named)
	if err != nil {
		return nil, nil, err
	}
	if b.Workers != nil {
		services = append(services, gateway.NewService(b.Workers).Service())
	}
	return append(append(services, runs...), control...), handlers, nil
}

func checkAPI(cfg APIConfig, b APIBackends) error {
	var errs []error
	required := map[string]bool{
		"store": b.Store == nil, "kafka": len(b.Kafka) == 0, "producer": b.Producer == nil,
		"client": b.Client == nil, "enqueuer": b.Enqueuer == nil, "executors": b.Executors == nil,
	}
	for _, name := range []string{"store", "kafka", "producer", "client", "enqueuer", "executors"} {
		if required[name] {
			errs = append(errs, fmt.Errorf("api backends: %s: required", name))
		}
	}
	if cfg.Shards < 1 {
		errs = append(errs, fmt.Errorf("api config: shards %d: must be at least 1", cfg.Shards))
	}
	return errors.Join(errs...)
}

// runServices builds the run, dead-letter, watch and cluster services and
// the watch's event stream.
func runServices(cfg APIConfig, b APIBackends, named func(string) *slog.Logger) ([]apiserver.Service, []apiserver.Handler, error) {
	names := cfg.Topics
	events, err := apiserver.NewEventLog(b.Kafka, names.Events())
	if err != nil {
		return nil, nil, err
	}
	runsCfg := apiserver.RunServiceConfig{History: b.Store, Index: b.Store, Jobs: b.Store, DagRuns: b.Store, Events: events, Logger: named("api-runs"),
		Shards: cfg.Shards}
	if b.Tokens != nil {
		runsCfg.Teams = b.Tokens
	}
	if b.Redis != nil {
		// The runners ship their attempts' live logs under their own key
		// prefix (assemble.Runner's).
		runsCfg.Logs = logtail.Reader{Redis: b.Redis, KeyPrefix: b.RedisKeyPrefix + runner.DefaultKeyPrefix}
	}
	runs, err := apiserver.NewRunService(runsCfg)
	if err != nil {
		return nil, nil, err
	}
	dlq, err := apiserver.NewDlqService(apiserver.DlqServiceConfig{
		DeadLetters: apiserver.KafkaDeadLetters{Opts: b.Kafka, Topic: names.DLQ()},
		Jobs:        b.Store, Enqueuer: b.Enqueuer, Now: cfg.Now, Logger: named("api-dlq"),
	})
	if err != nil {
		return nil, nil, err
	}
	watch, err := apiserver.NewWatchService(apiserver.WatchServiceConfig{
		Kafka: b.Kafka, Topic: names.Events(), Now: cfg.Now, Logger: named("api-watch"),
		MaxStreamsPerCaller: cfg.MaxWatchesPerCaller, MaxStreams: cfg.MaxWatches,
	})
	if err != nil {
		return nil, nil, err
	}
	cluster, err := apiserver.NewClusterService(apiserver.ClusterServiceConfig{
		Shards: b.Store, Admin: kadm.NewClient(b.Producer), Executors: b.Executors, Now: cfg.Now, Logger: named("api-cluster"),
		// The default group of every Sundial process; an installation that
		// renamed one sees it missing from the view.
		Groups: []apiserver.ConsumerGroup{
			{Role: "registry", Group: names.Group(registry.DefaultGroup)},
			{Role: "triggers", Group: names.Group(trigger.DefaultGroup)},
			{Role: "dispatchers", Group: names.Group(dispatcher.DefaultGroupID)},
			{Role: apiserver.RoleRunners, Group: names.Group(runner.DefaultGroup)},
			{Role: "history", Group: names.Group(history.DefaultGroup)},
			{Role: "dagengine", Group: names.Group(dagengine.DefaultGroup)},
		},
	})
	if err != nil {
		return nil, nil, err
	}
	services := []apiserver.Service{
		apiserver.ConnectService(apiv1connect.NewRunServiceHandler, apiv1connect.RunServiceHandler(runs)),
		apiserver.ConnectService(apiv1connect.NewDlqServiceHandler, apiv1connect.DlqServiceHandler(dlq)),
		apiserver.ConnectService(apiv1connect.NewWatchServiceHandler, apiv1connect.WatchServiceHandler(watch)),
		apiserver.ConnectService(apiv1connect.NewClusterServiceHandler, apiv1connect.ClusterServiceHandler(cluster)),
	}
	handlers := []apiserver.Handler{{Path: apiserver.WatchEventsPath, Handler: watch.EventsHandler()}}
	return services, handlers, nil
}

// controlServices builds the operator service, and the audit, quota and
// team services when their stores are given. With Redis, cancelling runs,
// backfills and the count of concurrent runs are served; without, those
// answer that Redis is needed.
func controlServices(cfg APIConfig, b APIBackends, trail *audit.Trail, named func(string) *slog.Logger) ([]apiserver.Service, error) {
	opCfg := operator.Config{
		Jobs: b.Store, History: b.Store, Producer: b.Client, Kafka: b.Kafka, Topics: cfg.Topics, Enqueuer: b.Enqueuer, Shards: cfg.Shards,
		// PlanApply's load counts a BROADCAST job's live members.
		Members: func(pool string) int { return len(b.Executors.Live(pool)) },
		Logger:  named("api-operator"),
	}
	if trail != nil {
		opCfg.Audit = operator.AuditTrail{Trail: trail}
	}
	var runs quota.RunCounter
	if b.Redis != nil {
		leases, err := leasing.New(leasing.Config{Client: b.Redis, KeyPrefix: b.RedisKeyPrefix + leasing.DefaultKeyPrefix})
		if err != nil {
			return nil, err
		}
		opCfg.Leases, opCfg.Redis, opCfg.RunnerKeyPrefix = leases, b.Redis, b.RedisKeyPrefix+runner.DefaultKeyPrefix
		runs = leases
	}
	opCfg.Due = b.Store
	op := operator.New(opCfg)
	ops, err := apiserver.NewOperatorService(apiserver.OperatorServiceConfig{Operator: op, Jobs: b.Store, Lister: b.Store, Logger: named("api-operator")})
	if err != nil {
		return nil, err
	}
	forecast, err := apiserver.NewForecastService(apiserver.ForecastServiceConfig{Forecaster: op, Shards: cfg.Shards, Logger: named("api-forecast")})
	if err != nil {
		return nil, err
	}
	services := []apiserver.Service{ops.Service(), forecast.Service()}
	if trail != nil {
		auditSvc, err := apiserver.NewAuditService(apiserver.AuditServiceConfig{Trail: trail, Jobs: b.Store, Logger: named("api-audit")})
		if err != nil {
			return nil, err
		}
		services = append(services, auditSvc.Service())
	}
	if b.Quotas != nil {
		quotasCfg := apiserver.QuotaServiceConfig{Store: b.Quotas, Runs: runs, Now: cfg.Now, Logger: named("api-quotas")}
		if trail != nil {
			quotasCfg.Audit = trail
		}
		quotas, err := apiserver.NewQuotaService(quotasCfg)
		if err != nil {
			return nil, err
		}
		services = append(services, quotas.Service())
	}
	if b.Tokens != nil && b.Quotas != nil {
		teamsCfg := apiserver.TeamServiceConfig{Tokens: b.Tokens, Jobs: b.Quotas, Now: cfg.Now, Logger: named("api-teams"),
			Topics: apiserver.KafkaTeamTopics{Kafka: b.Kafka, Topics: cfg.Topics}}
		if trail != nil {
			teamsCfg.Audit = trail
		}
		teams, err := apiserver.NewTeamService(teamsCfg)
		if err != nil {
			return nil, err
		}
		services = append(services, teams.Service())
	}
	return services, nil
}

// APIPublic are the handlers `sundial api` serves without a token: the
// web console's files under console.Path, and a redirect to them from the
// API's root. The console calls the API's services with the user's token,
// as any client does. The console logs in with a pasted token only.
func APIPublic() []apiserver.Handler {
	h, err := APIPublicWithSignIn(nil)
	if err != nil {
		// Without a sign-in there is nothing to refuse.
		panic(err)
	}
	return h
}

// APIPublicConsoleOff are the public handlers of `sundial api --console=false`:
// the console's paths, and the API's root that redirects to it, answer 404
// without a token, as the paths of an API without a console would; every
// other path needs a token as before.
func APIPublicConsoleOff() []apiserver.Handler {
	return consoleRoutes(http.NotFoundHandler())
}

// consoleRoutes are the console's paths and the API's root, routed to h.
func consoleRoutes(h http.Handler) []apiserver.Handler {
	return []apiserver.Handler{
		{Path: console.Path, Handler: h},
		{Path: "GET " + strings.TrimSuffix(console.Path, "/"), Handler: h},
		{Path: "GET /{$}", Handler: h},
	}
}

// APIPublicWithSignIn is APIPublic whose console also offers "Sign in
// with" the API's OpenID provider when signIn is set (console.SignIn).
func APIPublicWithSignIn(signIn *console.SignIn) ([]apiserver.Handler, error) {
	h, err := console.NewHandler(console.Config{SignIn: signIn})
	if err != nil {
		return nil, err
	}
	return consoleRoutes(h), nil
}
