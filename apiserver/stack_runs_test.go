package apiserver_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/cassandra"
)

// The callers every test runs as. "owner" and "other" are two teams;
// callerHeader picks one per request, and a request without it carries no
// principal at all.
const callerHeader = "X-Test-Caller"

var callers = map[string]auth.Principal{
	"owner":          {Subject: "token:owner", Team: "alpha", Role: auth.RoleViewer},
	"owner-operator": {Subject: "token:owner-op", Team: "alpha", Role: auth.RoleOperator},
	"owner-admin":    {Subject: "token:owner-admin", Team: "alpha", Role: auth.RoleAdmin},
	"other":          {Subject: "token:other", Team: "beta", Role: auth.RoleAdmin},
	"other-viewer":   {Subject: "token:other-viewer", Team: "beta", Role: auth.RoleViewer},
	"cluster-admin":  {Subject: "token:root", ClusterAdmin: true},
}

// withTestCaller stands in for the server's authentication: it puts the
// principal callerHeader names into the request's context.
func withTestCaller(t *testing.T, h http.Handler) http.Handler {
	t.Helper()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.Header.Get(callerHeader)
		if name == "" {
			h.ServeHTTP(w, r)
			return
		}
		p, ok := callers[name]
		if !ok {
			t.Errorf("test caller %q: unknown", name)
			http.Error(w, "unknown test caller", http.StatusBadRequest)
			return
		}
		h.ServeHTTP(w, r.WithContext(auth.NewContext(r.Context(), p)))
	})
}

// as returns a request carrying msg for the named caller ("" for none).
func as[T any](caller string, msg *T) *connect.Request[T] {
	req := connect.NewRequest(msg)
	if caller != "" {
		req.Header().Set(callerHeader, caller)
	}
	return req
}

// stack is one test's namespace on the real backends.
type stack struct {
	store   *cassandra.Store
	names   topics.Names
	brokers []string
	client  *kgo.Client
	admin   *kadm.Client
	logger  *slog.Logger
}

// setupStack opens the Cassandra store in a keyspace of the test's own and
// creates the topics named in want under a prefix of its own, with
// partitions partitions each.
func setupStack(t *testing.T, partitions int32, want ...func(topics.Names) string) *stack {
	t.Helper()
	k := testenv.NeedKafka(t)
	c := testenv.NeedCassandra(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cfg := cassandra.Config{Hosts: c.Hosts, Keyspace: c.Keyspace}
	_, err := cassandra.Migrate(ctx, cfg)
	require.NoError(t, err)
	st, err := cassandra.Open(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	_, err = st.InitCluster(ctx, 4)
	require.NoError(t, err)

	names := topics.Names{Prefix: k.TopicPrefix}
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.ProducerLinger(0))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	for _, name := range want {
		resp, err := adm.CreateTopic(ctx, partitions, -1, nil, name(names))
		require.NoError(t, err)
		require.NoError(t, resp.Err, "create topic %s", name(names))
	}
	for _, name := range want {
		require.Eventually(t, func() bool {
			ends, err := adm.ListEndOffsets(ctx, name(names))
			return err == nil && ends.Error() == nil && len(ends[name(names)]) == int(partitions)
		}, time.Minute, 50*time.Millisecond, "topic %s visible", name(names))
	}
	return &stack{store: st, names: names, brokers: k.Brokers, client: cl, admin: adm,
		logger: testenv.Logger(t, slog.LevelInfo)}
}

// serve mounts handlers behind the test caller middleware.
func serve(t *testing.T, mount func(mux *http.ServeMux)) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mount(mux)
	srv := httptest.NewServer(withTestCaller(t, mux))
	t.Cleanup(srv.Close)
	return srv
}

// putJob stores a job of team with the given payload.
func (s *stack) putJob(t *testing.T, id, team string, revision int64, payload string) {
	t.Helper()
	spec, err := proto.Marshal(&sundialv1.JobSpec{Id: id, OwnerTeam: team, Payload: []byte(payload),
		Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "noop"}}}})
	require.NoError(t, err)
	_, err = s.store.UpsertJob(t.Context(), store.Job{ID: id, Spec: spec, Revision: revision, UpdatedAt: time.Now()})
	require.NoError(t, err)
}

// produce writes msg to topic keyed by key, as the components do.
func (s *stack) produce(t *testing.T, topic, key string, msg proto.Message) {
	t.Helper()
	val, err := proto.Marshal(msg)
	require.NoError(t, err)
	rec := &kgo.Record{Topic: topic, Key: []byte(key), Value: val,
		Headers: []kgo.RecordHeader{{Key: sundialv1.HeaderContentType, Value: []byte(sundialv1.ProtobufContentType(msg))}}}
	require.NoError(t, s.client.ProduceSync(t.Context(), rec).FirstErr())
}

// requireCode checks that err is a Connect error with code.
func requireConnectCode(t *testing.T, code connect.Code, err error) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, connect.CodeOf(err), "error: %v", err)
}
