package apiserver_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/audit"
	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/client"
	"github.com/sundialhq/sundial/dagengine"
	"github.com/sundialhq/sundial/enqueue"
	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/leasing"
	"github.com/sundialhq/sundial/operator"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	"github.com/sundialhq/sundial/registry"
	"github.com/sundialhq/sundial/store/cassandra"
)

// shards is S in the tests: small, so topics are cheap to create.
const shards = 4

// clusterAdminToken authenticates the cluster admin.
const clusterAdminToken = "cluster-admin"

// tokenAuth is the tests' Authenticator: a token "TEAM:ROLE" is a member of
// TEAM with ROLE, clusterAdminToken the cluster admin; anything else is
// refused, as an unknown token would be.
type tokenAuth struct{}

func (tokenAuth) Authenticate(_ context.Context, bearer string) (auth.Principal, error) {
	if bearer == clusterAdminToken {
		return auth.Principal{Subject: "token:" + bearer, ClusterAdmin: true}, nil
	}
	team, roleName, ok := strings.Cut(bearer, ":")
	if !ok || team == "" {
		return auth.Principal{}, auth.Refuse(auth.ReasonUnknown, "unknown token")
	}
	role, err := auth.ParseRole(roleName)
	if err != nil {
		return auth.Principal{}, auth.Refuse(auth.ReasonClaims, err.Error())
	}
	return auth.Principal{Subject: "token:" + bearer, Team: team, Role: role}, nil
}

// token is the test token of a member of team with role.
func token(team string, role auth.Role) string { return team + ":" + role.String() }

// env is one API server on the real stack, with a registry and a DAG engine
// answering its changes. The subtests share it and keep apart by using
// teams and ids of their own.
type env struct {
	url     string
	store   *cassandra.Store
	metrics *prometheus.Registry
	http    *http.Client
	// brokers and names are the env's Kafka and its topics.
	brokers []string
	names   topics.Names
}

// envOptions say how newEnvWith builds an env.
type envOptions struct {
	// teams get their definitions topics created before the registry and
	// the DAG engine start; with teams, the registry and the engine are
	// configured as by default (team topics only) and the API's client
	// produces each change to its owner team's topic, as `sundial api` does.
	teams []string
	// teamTopicsOnly configures the registry and the DAG engine as by
	// default (team topics only) without topics made beforehand: the test
	// makes its teams' topics, which the registry picks up within a second.
	teamTopicsOnly bool
}

// newEnv is an env whose registry and DAG engine also read the shared
// sundial.jobs, which its client writes: the subtests' teams are made up
// as they go, without topics of their own.
func newEnv(t *testing.T) *env { return newEnvWith(t, envOptions{}) }

func newEnvWith(t *testing.T, o envOptions) *env {
	t.Helper()
	enforced := len(o.teams) > 0 || o.teamTopicsOnly
	var refresh time.Duration // the registry's default
	if o.teamTopicsOnly {
		refresh = time.Second
	}
	k := testenv.NeedKafka(t)
	c := testenv.NeedCassandra(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	logger := slog.New(slog.DiscardHandler)

	cfg := cassandra.Config{Hosts: c.Hosts, Keyspace: c.Keyspace, SchemaTimeout: 2 * time.Minute}
	_, err := cassandra.Migrate(ctx, cfg)
	require.NoError(t, err)
	st, err := cassandra.Open(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	_, err = st.InitCluster(ctx, shards)
	require.NoError(t, err)

	names := topics.Names{Prefix: k.TopicPrefix}
	specs, err := names.Specs(shards)
	require.NoError(t, err)
	producer, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.RecordPartitioner(enqueue.Partitioner(names, nil)))
	require.NoError(t, err)
	t.Cleanup(producer.Close)
	for _, team := range o.teams {
		specs = append(specs, names.TeamJobsSpec(team))
	}
	_, err = topics.Ensure(ctx, kadm.NewClient(producer), specs, -1)
	require.NoError(t, err)
	waker, err := enqueue.New(enqueue.Config{Store: st, Client: producer, Topics: names, Shards: shards, Registerer: prometheus.NewRegistry(), Logger: logger})
	require.NoError(t, err)

	reg, err := registry.New(registry.Config{
		Kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, Topics: names, Group: k.TopicPrefix + "registry", Store: st, Waker: waker,
		SharedTopic: !enforced, TopicRefresh: refresh, Registerer: prometheus.NewRegistry(), Logger: logger,
	})
	require.NoError(t, err)
	require.NoError(t, reg.Start(ctx))
	t.Cleanup(reg.Stop)
	engine, err := dagengine.New(dagengine.Config{
		Kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, Topics: names, Group: k.TopicPrefix + "dagengine", DefinitionsGroup: k.TopicPrefix + "dagdefs", SharedTopic: !enforced,
		Store: st, Enqueuer: waker, Producer: producer, Shards: shards,
		Registerer: prometheus.NewRegistry(), Logger: logger,
	})
	require.NoError(t, err)
	require.NoError(t, engine.Start(ctx))
	t.Cleanup(engine.Stop)

	cl, err := client.New(client.Config{Kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, Topics: names, ByOwner: enforced, Logger: logger})
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	trail, err := audit.New(audit.Config{Store: st, Producer: producer, Topic: names.Audit()})
	require.NoError(t, err)
	// Generous: an answer must come, however slow this machine is.
	jobs, err := apiserver.NewJobService(apiserver.JobServiceConfig{Store: st, Writer: cl, AnswerTimeout: 3 * time.Minute, Audit: trail})
	require.NoError(t, err)
	dags, err := apiserver.NewDagService(apiserver.DagServiceConfig{
		Store: st, Writer: apiserver.KafkaDagWriter{Client: cl}, AnswerTimeout: 3 * time.Minute,
	})
	require.NoError(t, err)
	r := testenv.NeedRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	leases, err := leasing.New(leasing.Config{Client: rdb, KeyPrefix: r.KeyPrefix + leasing.DefaultKeyPrefix})
	require.NoError(t, err)
	op := operator.New(operator.Config{
		Jobs: st, History: st, Producer: cl, Leases: leases, Redis: rdb, RunnerKeyPrefix: r.KeyPrefix + "runner:",
		Kafka: []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, Topics: names, Enqueuer: waker, Shards: shards,
		Audit: operator.AuditTrail{Trail: trail}, Logger: logger,
	})
	ops, err := apiserver.NewOperatorService(apiserver.OperatorServiceConfig{Operator: op, Jobs: st, Lister: st, Logger: logger})
	require.NoError(t, err)
	auditSvc, err := apiserver.NewAuditService(apiserver.AuditServiceConfig{Trail: trail, Jobs: st, Logger: logger})
	require.NoError(t, err)
	quotas, err := apiserver.NewQuotaService(apiserver.QuotaServiceConfig{Store: st, Runs: leases, Logger: logger})
	require.NoError(t, err)
	metrics := prometheus.NewRegistry()
	srv, err := apiserver.New(apiserver.Config{
		Addr: "127.0.0.1:0", Authenticator: tokenAuth{},
		Services:   []apiserver.Service{jobs.Service(), dags.Service(), ops.Service(), auditSvc.Service(), quotas.Service()},
		Registerer: metrics, Gatherer: metrics, Logger: logger,
	})
	require.NoError(t, err)
	require.NoError(t, srv.Start(ctx))
	t.Cleanup(srv.Stop)

	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &env{url: "http://" + srv.Addr().String(), store: st, metrics: metrics, http: &http.Client{Transport: tr}, brokers: k.Brokers, names: names}
}

// jobs is a Connect Go client of JobService sending tok ("" sends none).
func (e *env) jobs(tok string) apiv1connect.JobServiceClient {
	return apiv1connect.NewJobServiceClient(e.http, e.url, e.opts(tok)...)
}

// operator is a Connect Go client of OperatorService sending tok.
func (e *env) operator(tok string) apiv1connect.OperatorServiceClient {
	return apiv1connect.NewOperatorServiceClient(e.http, e.url, e.opts(tok)...)
}

// audit is a Connect Go client of AuditService sending tok.
func (e *env) audit(tok string) apiv1connect.AuditServiceClient {
	return apiv1connect.NewAuditServiceClient(e.http, e.url, e.opts(tok)...)
}

// quotas is a Connect Go client of QuotaService sending tok.
func (e *env) quotas(tok string) apiv1connect.QuotaServiceClient {
	return apiv1connect.NewQuotaServiceClient(e.http, e.url, e.opts(tok)...)
}

// dags is a Connect Go client of DagService sending tok.
func (e *env) dags(tok string) apiv1connect.DagServiceClient {
	return apiv1connect.NewDagServiceClient(e.http, e.url, e.opts(tok)...)
}

func (e *env) opts(tok string) []connect.ClientOption {
	if tok == "" {
		return nil
	}
	return []connect.ClientOption{connect.WithInterceptors(apiserver.BearerToken(tok))}
}
