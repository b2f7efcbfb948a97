package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/client"
	"github.com/sundialhq/sundial/dagengine"
	"github.com/sundialhq/sundial/dagengine/dagrun"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/memory"
)

// dropped enqueues and produces nothing and acknowledges everything.
type dropped struct{}

func (dropped) Enqueue(context.Context, ...store.DueEntry) error { return nil }
func (dropped) ProduceSync(_ context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	out := make(kgo.ProduceResults, 0, len(rs))
	for _, r := range rs {
		out = append(out, kgo.ProduceResult{Record: r})
	}
	return out
}

// readOnlyDags is a DagWriter for a test that applies no DAG.
type readOnlyDags struct{}

func (readOnlyDags) ApplyDag(context.Context, *sundialv1.DagSpec) (client.Receipt, error) {
	panic("not called")
}
func (readOnlyDags) DeleteDag(context.Context, string) (client.Receipt, error) { panic("not called") }
func (readOnlyDags) WaitStatus(context.Context, ...client.Receipt) ([]*sundialv1.JobStatus, error) {
	panic("not called")
}

// TestDagResumeThroughAPI: with --api-url, sundial dag resume asks the
// API, which resumes with the DAG engine's code: an admin of the run's
// team reruns the failed node, a viewer is refused, another team finds no
// such run.
func TestDagResumeThroughAPI(t *testing.T) {
	ctx := t.Context()
	st, err := memory.New(memory.Options{})
	require.NoError(t, err)
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	_, err = st.InitCluster(ctx, 4)
	require.NoError(t, err)
	job, err := proto.Marshal(&sundialv1.JobSpec{Id: "billing.invoice", OwnerTeam: "billing"})
	require.NoError(t, err)
	_, err = st.UpsertJob(ctx, store.Job{ID: "billing.invoice", Spec: job, Revision: 1, UpdatedAt: now})
	require.NoError(t, err)
	spec, err := proto.Marshal(&sundialv1.DagSpec{Id: "billing.etl", OwnerTeam: "billing", Nodes: []*sundialv1.DagNode{
		{Id: "invoice", Job: &sundialv1.DagNode_JobId{JobId: "billing.invoice"}}}})
	require.NoError(t, err)
	_, err = st.PutDag(ctx, store.Dag{ID: "billing.etl", Spec: spec, Revision: 1, UpdatedAt: now})
	require.NoError(t, err)
	runs, err := dagengine.NewRuns(dagengine.RunsConfig{Store: st, Enqueuer: dropped{}, Producer: dropped{}, Shards: 4, Now: func() time.Time { return now }})
	require.NoError(t, err)
	id, _, err := runs.StartRun(ctx, "billing.etl", now, dagengine.OriginTrigger)
	require.NoError(t, err)
	_, err = runs.Apply(ctx, id, dagrun.RunEvent{RunID: dagrun.NodeRunID(id, "invoice", 1), Node: "invoice", Attempt: 1, State: sundialv1.RunState_RUN_STATE_DEAD})
	require.NoError(t, err)

	svc, err := apiserver.NewDagService(apiserver.DagServiceConfig{Store: st, Writer: readOnlyDags{}, Runs: runs, Logger: testLogger(t)})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(apiv1connect.NewDagServiceHandler(svc))
	srv := httptest.NewServer(bearerCallers(mux, map[string]auth.Principal{
		"Bearer tok-billing-admin": {Subject: "token:billing-admin", Team: "billing", Role: auth.RoleAdmin},
		"Bearer tok-billing":       {Subject: "token:billing", Team: "billing", Role: auth.RoleViewer},
		"Bearer tok-search":        {Subject: "token:search", Team: "search", Role: auth.RoleAdmin},
	}))
	t.Cleanup(srv.Close)

	for tok, code := range map[string]string{"tok-billing": "permission_denied", "tok-search": "not_found"} {
		t.Setenv("SUNDIAL_API_TOKEN", tok)
		var out, errOut bytes.Buffer
		assert.Equal(t, 1, run(ctx, []string{"sundial", "dag", "resume", id, "--api-url", srv.URL}, &out, &errOut), tok)
		assert.Contains(t, errOut.String(), code, tok)
	}
	_, before, err := runs.Get(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, dagrun.StatusFailed, before.Status, "a refused resume changes nothing")

	t.Setenv("SUNDIAL_API_TOKEN", "tok-billing-admin")
	out := cliOutput(t, "dag", "resume", id, "--api-url", srv.URL)
	assert.Contains(t, out, "DAG run   "+id)
	assert.Contains(t, out, "Resumes   1")
	assert.Contains(t, out, dagrun.NodeRunID(id, "invoice", 2), "the node runs again under a new run id")
	row, after, err := runs.Get(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, dagrun.StatusRunning, after.Status)

	// Without --api-url the command prints the stored run with the same
	// printer: the output does not depend on the path.
	d, err := apiserver.DagRunDetail(row)
	require.NoError(t, err)
	var direct bytes.Buffer
	require.NoError(t, writeDagRunDetail(&direct, d))
	assert.Equal(t, direct.String(), out)
	assert.Contains(t, out, "billing.invoice", "each node's job")
}
