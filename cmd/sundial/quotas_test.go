package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/leasing"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	"github.com/sundialhq/sundial/quota"
	"github.com/sundialhq/sundial/store/cassandra"
)

func TestQuotasSetAndList(t *testing.T) {
	t.Parallel()
	cass := testenv.NeedCassandra(t)
	rd := testenv.NeedRedis(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cfg := cassandra.Config{Hosts: cass.Hosts, Keyspace: cass.Keyspace, SchemaTimeout: 2 * time.Minute}
	_, err := cassandra.Migrate(ctx, cfg)
	require.NoError(t, err)
	st, err := cassandra.Open(ctx, cfg)
	require.NoError(t, err)
	defer st.Close()
	require.NoError(t, st.TrackTeamJob(ctx, "payments", "settle", 1))
	require.NoError(t, st.TrackTeamJob(ctx, "payments", "refund", 2))

	conn := []string{"--cassandra-hosts", strings.Join(cass.Hosts, ","), "--keyspace", cass.Keyspace}
	code, out, errOut := runCLI(t, append([]string{"quotas", "set", "--team", "payments", "--max-jobs", "1000", "--max-concurrent-runs", "5", "--max-runs-per-minute", "600"}, conn...)...)
	require.Equal(t, 0, code, "stderr: %s", errOut)
	assert.Equal(t, "team payments: max_jobs 1000, max_concurrent_runs 5, max_runs_per_minute 600\n", out)
	code, out, errOut = runCLI(t, append([]string{"quotas", "set", "--team", "payments", "--max-jobs", "0"}, conn...)...)
	require.Equal(t, 0, code, "stderr: %s", errOut)
	assert.Equal(t, "team payments: max_jobs unlimited, max_concurrent_runs 5, max_runs_per_minute 600\n", out, "a limit left out keeps its value")
	code, _, errOut = runCLI(t, append([]string{"quotas", "set", "--team", "*", "--max-jobs", "10"}, conn...)...)
	require.Equal(t, 0, code, "stderr: %s", errOut)

	// One run of payments executing now, as a runner would hold it.
	rdb := redis.NewClient(&redis.Options{Addr: rd.Addr})
	defer rdb.Close()
	leases, err := leasing.New(leasing.Config{Client: rdb, KeyPrefix: rd.KeyPrefix + leasing.DefaultKeyPrefix})
	require.NoError(t, err)
	require.NoError(t, leases.AcquireTeamSlot(ctx, "payments", "settle@1", 5))

	code, out, errOut = runCLI(t, append([]string{"quotas", "list", "--team", "payments", "--team", "search",
		"--redis-addr", rd.Addr, "--redis-key-prefix", rd.KeyPrefix}, conn...)...)
	require.Equal(t, 0, code, "stderr: %s", errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	assert.Regexp(t, `^TEAM\s+JOBS\s+MAX JOBS\s+RUNNING\s+MAX CONCURRENT RUNS\s+MAX RUNS PER MINUTE$`, lines[0])
	assert.Regexp(t, `^payments\s+2\s+unlimited\s+1\s+5\s+600$`, lines[1])
	assert.Regexp(t, `^search\s+0\s+10\s+-\s+unlimited\s+unlimited$`, lines[2], "the default applies to a team without a row")

	code, _, errOut = runCLI(t, append([]string{"quotas", "set", "--max-jobs", "-1"}, conn...)...)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "team: required")
	assert.Contains(t, errOut, "max_jobs -1: must be 0 (unlimited) or positive")
}

// TestQuotasSetThroughAPI sets quotas with --api-url: the API's
// SetQuotas writes them (a limit left out kept), the CLI prints what the
// API stored and lists it back, a team's admin is refused, and a bad value
// is refused by the same check before any call.
func TestQuotasSetThroughAPI(t *testing.T) {
	store := quota.NewMemory()
	var calls atomic.Int64
	svc, err := apiserver.NewQuotaService(apiserver.QuotaServiceConfig{Store: store, Logger: testLogger(t)})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(apiv1connect.NewQuotaServiceHandler(svc))
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		mux.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(bearerCallers(counted, map[string]auth.Principal{
		"Bearer tok-root":          {Subject: "token:root", ClusterAdmin: true, Role: auth.RoleAdmin},
		"Bearer tok-billing-admin": {Subject: "token:billing-admin", Team: "billing", Role: auth.RoleAdmin},
	}))
	t.Cleanup(srv.Close)
	t.Setenv(envName("cassandra-hosts"), "")

	out := cliOutput(t, "quotas", "set", "--team", "billing", "--max-jobs", "10", "--max-runs-per-minute", "600", "--api-url", srv.URL, "--api-token", "tok-root")
	assert.Equal(t, "team billing: max_jobs 10, max_concurrent_runs unlimited, max_runs_per_minute 600\n", out)
	out = cliOutput(t, "quotas", "set", "--team", "billing", "--max-concurrent-runs", "3", "--api-url", srv.URL, "--api-token", "tok-root")
	assert.Equal(t, "team billing: max_jobs 10, max_concurrent_runs 3, max_runs_per_minute 600\n", out, "a limit left out keeps its value")
	rows, err := store.ListQuotas(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []quota.Quota{{Team: "billing", MaxJobs: 10, MaxConcurrentRuns: 3, MaxRunsPerMinute: 600}}, rows)

	out = cliOutput(t, "quotas", "list", "--team", "billing", "--api-url", srv.URL, "--api-token", "tok-root")
	assert.Regexp(t, `(?m)^billing\s+0\s+10\s+-\s+3\s+600$`, out, "quotas list reads what the API stored")

	code, _, errOut := runCLI(t, "quotas", "set", "--team", "billing", "--max-jobs", "0", "--api-url", srv.URL, "--api-token", "tok-billing-admin")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "permission_denied")

	before := calls.Load()
	code, _, errOut = runCLI(t, "quotas", "set", "--team", "billing", "--max-jobs", "-1", "--api-url", srv.URL, "--api-token", "tok-root")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "max_jobs -1: must be 0 (unlimited) or positive")
	assert.Equal(t, before, calls.Load(), "a bad value reached the API")
}
