package apiserver_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/client"
	"github.com/sundialhq/sundial/dagengine/dagrun"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/memory"
)

// noDagWriter is a DagWriter for tests that only read.
type noDagWriter struct{}

func (noDagWriter) ApplyDag(context.Context, *sundialv1.DagSpec) (client.Receipt, error) {
	panic("not called")
}
func (noDagWriter) DeleteDag(context.Context, string) (client.Receipt, error) { panic("not called") }
func (noDagWriter) WaitStatus(context.Context, ...client.Receipt) ([]*sundialv1.JobStatus, error) {
	panic("not called")
}

// TestDagRunsAreReadByTheirTeam: ListDagRuns lists a DAG's runs newest
// first, bounded, and GetDagRun shows each node's state with its parents
// and run id; another team finds neither.
func TestDagRunsAreReadByTheirTeam(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := memory.New(memory.Options{})
	require.NoError(t, err)
	spec := &sundialv1.DagSpec{Id: "alpha.etl", OwnerTeam: "alpha", Nodes: []*sundialv1.DagNode{
		{Id: "extract", Job: &sundialv1.DagNode_JobId{JobId: "alpha.x"}},
		{Id: "load", Job: &sundialv1.DagNode_JobId{JobId: "alpha.y"}, Parents: []string{"extract"}},
	}}
	raw, err := proto.Marshal(spec)
	require.NoError(t, err)
	now := time.Now().UTC().Truncate(time.Millisecond)
	_, err = st.PutDag(ctx, store.Dag{ID: "alpha.etl", Spec: raw, Revision: 1, UpdatedAt: now})
	require.NoError(t, err)
	var newest string
	for i := range 3 {
		due := now.Add(time.Duration(i) * time.Minute)
		id := dagrun.RunID("alpha.etl", due)
		state, err := dagrun.Marshal(dagrun.State{DagRunID: id, DagID: "alpha.etl", Due: due, Status: dagrun.StatusRunning, CreatedAt: due,
			Nodes: []dagrun.Node{
				{ID: "extract", Phase: dagrun.Succeeded, Gen: 1, Attempt: 1, StartedAt: due, EndedAt: due.Add(time.Second), RunState: sundialv1.RunState_RUN_STATE_SUCCEEDED},
				{ID: "load", Phase: dagrun.Running, Gen: 1, Attempt: 1, StartedAt: due.Add(time.Second), RunState: sundialv1.RunState_RUN_STATE_STARTED},
			}})
		require.NoError(t, err)
		_, _, err = st.CreateDagRun(ctx, store.DagRun{ID: id, DagID: "alpha.etl", Due: due, Origin: "schedule", Spec: raw, State: state,
			Status: "running", Summary: "1/2 succeeded, 1 running", Active: true, CreatedAt: due, UpdatedAt: due})
		require.NoError(t, err)
		newest = id
	}
	svc, err := apiserver.NewDagService(apiserver.DagServiceConfig{Store: st, Writer: noDagWriter{}})
	require.NoError(t, err)
	srv := serve(t, func(mux *http.ServeMux) { mux.Handle(apiv1connect.NewDagServiceHandler(svc)) })
	c := apiv1connect.NewDagServiceClient(srv.Client(), srv.URL)

	list, err := c.ListDagRuns(ctx, as("owner", &apiv1.ListDagRunsRequest{DagId: "alpha.etl", Limit: 2}))
	require.NoError(t, err)
	require.Len(t, list.Msg.GetDagRuns(), 2, "the limit bounds the list")
	assert.Equal(t, newest, list.Msg.GetDagRuns()[0].GetDagRunId(), "newest first")
	assert.Equal(t, "1/2 succeeded, 1 running", list.Msg.GetDagRuns()[0].GetSummary())

	got, err := c.GetDagRun(ctx, as("owner", &apiv1.GetDagRunRequest{DagRunId: newest}))
	require.NoError(t, err)
	nodes := got.Msg.GetDagRun().GetNodes()
	require.Len(t, nodes, 2)
	assert.Equal(t, "succeeded", nodes[0].GetPhase())
	assert.Equal(t, newest+"/extract", nodes[0].GetRunId())
	assert.Equal(t, "running", nodes[1].GetPhase())
	assert.Equal(t, []string{"extract"}, nodes[1].GetParents())
	assert.Equal(t, "alpha.etl", got.Msg.GetDagRun().GetSpec().GetId())

	_, err = c.GetDagRun(ctx, as("other", &apiv1.GetDagRunRequest{DagRunId: newest}))
	requireConnectCode(t, connect.CodeNotFound, err)
	_, err = c.ListDagRuns(ctx, as("other", &apiv1.ListDagRunsRequest{DagId: "alpha.etl"}))
	requireConnectCode(t, connect.CodeNotFound, err)
	_, err = c.ListDagRuns(ctx, as("owner", &apiv1.ListDagRunsRequest{DagId: "alpha.etl", Limit: 101}))
	requireConnectCode(t, connect.CodeInvalidArgument, err)
	_, err = c.GetDagRun(ctx, as("cluster-admin", &apiv1.GetDagRunRequest{DagRunId: "alpha.etl@1"}))
	requireConnectCode(t, connect.CodeNotFound, err)
}
