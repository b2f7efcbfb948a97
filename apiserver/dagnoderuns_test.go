package apiserver_test

import (
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/internal/topics"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// TestDagCannotReadAnotherTeamsRunErrors: alpha's DAG run has a node on
// alpha's own job and a node that names beta's job, whose run (stored in
// beta's job history, as a DAG engine started it before it checked the
// job's team) failed with beta's downstream error. Alpha reads its own
// node's run through GetRun and ListRuns, and nothing of beta's: the
// node run is not found and the DAG run's list leaves it out. Beta and a
// cluster admin still read it.
func TestDagCannotReadAnotherTeamsRunErrors(t *testing.T) {
	t.Parallel()
	s := setupStack(t, 1, topics.Names.Events)
	ctx := t.Context()
	s.putJob(t, "alpha.work", "alpha", 1, "v1")
	s.putJob(t, "beta.secret", "beta", 1, "v1")

	dagRun := "alpha.steal@1930000000000"
	due := time.UnixMilli(1930000000000)
	spec, err := proto.Marshal(&sundialv1.DagSpec{Id: "alpha.steal", OwnerTeam: "alpha", Nodes: []*sundialv1.DagNode{
		{Id: "mine", Job: &sundialv1.DagNode_JobId{JobId: "alpha.work"}},
		{Id: "theirs", Job: &sundialv1.DagNode_JobId{JobId: "beta.secret"}},
		{Id: "ghost", Job: &sundialv1.DagNode_JobId{JobId: "beta.ghost"}},
	}})
	require.NoError(t, err)
	_, _, err = s.store.CreateDagRun(ctx, store.DagRun{ID: dagRun, DagID: "alpha.steal", Due: due, Origin: "trigger", Spec: spec,
		State: []byte{1}, Status: "running", Active: true, CreatedAt: time.Now(), UpdatedAt: time.Now()})
	require.NoError(t, err)
	mine, theirs := dagRun+"/mine", dagRun+"/theirs"
	require.NoError(t, s.store.RecordRuns(ctx, []store.RunRecord{
		{JobID: "alpha.work", RunID: mine, Attempt: 1, Due: due, State: store.StateSucceeded, Started: due, Finished: due.Add(time.Second),
			Duration: time.Second, UpdatedAt: due.Add(time.Second)},
		{JobID: "beta.secret", RunID: theirs, Attempt: 1, Due: due, State: store.StateFailed, Started: due, Finished: due.Add(time.Second),
			Duration: time.Second, Error: "http_401: beta's downstream says the key sk-beta is revoked", UpdatedAt: due.Add(time.Second)},
	}))

	evlog, err := apiserver.NewEventLog([]kgo.Opt{kgo.SeedBrokers(s.brokers...)}, s.names.Events())
	require.NoError(t, err)
	svc, err := apiserver.NewRunService(apiserver.RunServiceConfig{History: s.store, Jobs: s.store, DagRuns: s.store,
		Events: evlog, Logger: s.logger})
	require.NoError(t, err)
	srv := serve(t, func(mux *http.ServeMux) { mux.Handle(apiv1connect.NewRunServiceHandler(svc)) })
	client := apiv1connect.NewRunServiceClient(srv.Client(), srv.URL)

	runIDs := func(caller string) []string {
		resp, err := client.ListRuns(ctx, as(caller, &apiv1.ListRunsRequest{DagRunId: dagRun}))
		require.NoError(t, err)
		var out []string
		for _, a := range resp.Msg.GetAttempts() {
			out = append(out, a.GetRunId())
			if caller == "owner" {
				assert.NotContains(t, a.GetError(), "sk-beta", "alpha read beta's run error")
			}
		}
		return out
	}

	resp, err := client.GetRun(ctx, as("owner", &apiv1.GetRunRequest{RunId: mine}))
	require.NoError(t, err, "alpha reads its own node's run")
	assert.Equal(t, "alpha", resp.Msg.GetRun().GetOwnerTeam())
	for _, id := range []string{theirs, dagRun + "/ghost"} {
		resp, err := client.GetRun(ctx, as("owner", &apiv1.GetRunRequest{RunId: id}))
		if err == nil {
			t.Logf("alpha GetRun %s: %v", id, resp.Msg.GetRun().GetAttempts())
		}
		requireConnectCode(t, connect.CodeNotFound, err)
	}
	got := runIDs("owner")
	t.Logf("alpha ListRuns %s: %v", dagRun, got)
	assert.Equal(t, []string{mine}, got)

	// Beta's job history is beta's: beta reads the run, not the DAG run.
	resp, err = client.GetRun(ctx, as("other-viewer", &apiv1.GetRunRequest{RunId: theirs}))
	require.NoError(t, err)
	assert.Equal(t, "beta", resp.Msg.GetRun().GetOwnerTeam())
	assert.Empty(t, runIDs("other-viewer"), "the DAG run is alpha's")
	assert.ElementsMatch(t, []string{mine, theirs}, runIDs("cluster-admin"))
}
