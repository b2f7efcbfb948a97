package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// noWrites is a JobWriter for read-only tests.
type noWrites struct{ apiserver.JobWriter }

// TestJobsListPagesThroughTheAPI: one page and the next page's token, every
// page with --all, only the caller's team, and no path without --api-url.
func TestJobsListPagesThroughTheAPI(t *testing.T) {
	st := mustMemoryStore(t)
	ctx := t.Context()
	_, err := st.InitCluster(ctx, 4)
	require.NoError(t, err)
	for _, j := range []struct{ id, team string }{{"billing.a", "billing"}, {"billing.b", "billing"}, {"billing.c", "billing"}, {"search.x", "search"}} {
		spec, err := proto.Marshal(&sundialv1.JobSpec{Id: j.id, OwnerTeam: j.team, Schedule: &sundialv1.Schedule{Kind: &sundialv1.Schedule_Immediate{Immediate: &sundialv1.Immediate{}}}})
		require.NoError(t, err)
		_, err = st.UpsertJob(ctx, store.Job{ID: j.id, Spec: spec, Revision: 7, UpdatedAt: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)})
		require.NoError(t, err)
	}
	svc, err := apiserver.NewJobService(apiserver.JobServiceConfig{Store: st, Writer: noWrites{}, Logger: testLogger(t)})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(apiv1connect.NewJobServiceHandler(svc))
	srv := httptest.NewServer(bearerCallers(mux, testTokens))
	t.Cleanup(srv.Close)
	t.Setenv("SUNDIAL_API_TOKEN", "tok-billing")

	page := cliOutput(t, "jobs", "list", "--api-url", srv.URL, "--page-size", "2")
	assert.Contains(t, page, "billing.a")
	assert.Contains(t, page, "billing.b")
	assert.NotContains(t, page, "billing.c")
	require.Contains(t, page, "more: --page-token ")
	token := strings.TrimSpace(strings.TrimSuffix(strings.SplitN(strings.SplitN(page, "more: --page-token ", 2)[1], " ", 2)[0], "\n"))
	next := cliOutput(t, "jobs", "list", "--api-url", srv.URL, "--page-size", "2", "--page-token", token)
	assert.Contains(t, next, "billing.c")
	assert.NotContains(t, next, "more:")

	all := cliOutput(t, "jobs", "list", "--api-url", srv.URL, "--page-size", "2", "--all", "-o", "json")
	assert.Equal(t, 3, strings.Count(all, "\n"), all)
	assert.NotContains(t, all, "search.x", "another team's job is not listed")

	code, _, errOut := runCLI(t, "jobs", "list", "--output", "xml")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "--api-url")
	assert.Contains(t, errOut, "--output")
}

// TestClusterCommandShowsShardsAndLag prints the API's cluster view: each
// shard's owner and watermark lag, unowned shards, and the consumer groups.
func TestClusterCommandShowsShardsAndLag(t *testing.T) {
	st := mustMemoryStore(t)
	ctx := t.Context()
	_, err := st.InitCluster(ctx, 4)
	require.NoError(t, err)
	_, err = st.ClaimShard(ctx, 0, "dispatcher-1", 0)
	require.NoError(t, err)
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "sundial.jobs.billing"))
	require.NoError(t, err)
	t.Cleanup(kc.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	svc, err := apiserver.NewClusterService(apiserver.ClusterServiceConfig{Shards: st, Admin: kadm.NewClient(cl),
		Groups: []apiserver.ConsumerGroup{{Role: "registry", Group: "sundial-registry"}}, Now: time.Now, Logger: testLogger(t)})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(apiv1connect.NewClusterServiceHandler(svc))
	admin := map[string]auth.Principal{"Bearer tok-admin": {Subject: "token:admin", ClusterAdmin: true}}
	srv := httptest.NewServer(bearerCallers(mux, admin))
	t.Cleanup(srv.Close)

	out := cliOutput(t, "cluster", "--api-url", srv.URL, "--api-token", "tok-admin")
	assert.Contains(t, out, "4 shards")
	assert.Regexp(t, `(?m)^0\s+dispatcher-1\s+1\s+`, out)
	assert.Regexp(t, `(?m)^1\s+\(none\)\s+0\s+never advanced`, out)
	assert.Regexp(t, `(?m)^sundial-registry\s+registry\s+`, out)
	js := cliOutput(t, "cluster", "--api-url", srv.URL, "--api-token", "tok-admin", "-o", "json")
	assert.Contains(t, js, `"shardCount":4`)
}
