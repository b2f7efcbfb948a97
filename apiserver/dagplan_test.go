package apiserver_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/client"
	"github.com/sundialhq/sundial/dagengine"
	"github.com/sundialhq/sundial/dagengine/dag"
	"github.com/sundialhq/sundial/dagengine/dagrun"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/memory"
)

// dagTest is a DagService over a memory store, with the DAG engine's Runs
// (whose node runs and events go to recorders) resuming its runs. Its
// writer panics: a plan that produced anything fails the test.
type dagTest struct {
	store  *memory.Store
	runs   *dagengine.Runs
	queue  *queueRecorder
	trail  *recorded
	client apiv1connect.DagServiceClient
	now    time.Time
}

// queueRecorder keeps the node runs enqueued.
type queueRecorder struct {
	mu   sync.Mutex
	runs []string
}

func (q *queueRecorder) Enqueue(_ context.Context, entries ...store.DueEntry) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, e := range entries {
		q.runs = append(q.runs, e.RunID)
	}
	return nil
}

func (q *queueRecorder) enqueued() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]string(nil), q.runs...)
}

// acked acknowledges every record, producing nothing.
type acked struct{}

func (acked) ProduceSync(_ context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	out := make(kgo.ProduceResults, 0, len(rs))
	for _, r := range rs {
		out = append(out, kgo.ProduceResult{Record: r})
	}
	return out
}

// etlDag is DAG alpha.etl of registered jobs: extract, then load.
func etlDag() *sundialv1.DagSpec {
	return &sundialv1.DagSpec{Id: "alpha.etl", OwnerTeam: "alpha", Description: "nightly",
		Schedule: &sundialv1.Schedule{TimeZone: "UTC", Kind: &sundialv1.Schedule_Cron{Cron: &sundialv1.Cron{Expression: "0 3 * * *"}}},
		Nodes: []*sundialv1.DagNode{
			{Id: "extract", Job: &sundialv1.DagNode_JobId{JobId: "alpha.extract"}},
			{Id: "load", Job: &sundialv1.DagNode_JobId{JobId: "alpha.load"}, Parents: []string{"extract"}},
		}}
}

func newDagTest(t *testing.T) *dagTest {
	t.Helper()
	st, err := memory.New(memory.Options{})
	require.NoError(t, err)
	d := &dagTest{store: st, queue: &queueRecorder{}, trail: &recorded{}, now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	_, err = st.InitCluster(t.Context(), 4)
	require.NoError(t, err)
	for id, team := range map[string]string{"alpha.extract": "alpha", "alpha.load": "alpha", "alpha.report": "alpha", "beta.secret": "beta"} {
		raw, err := proto.Marshal(&sundialv1.JobSpec{Id: id, OwnerTeam: team,
			Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "noop"}}}})
		require.NoError(t, err)
		_, err = st.UpsertJob(t.Context(), store.Job{ID: id, Spec: raw, Revision: 1, UpdatedAt: d.now})
		require.NoError(t, err)
	}
	d.putDag(t, etlDag(), 1)
	d.runs, err = dagengine.NewRuns(dagengine.RunsConfig{Store: st, Enqueuer: d.queue, Producer: acked{}, Shards: 4,
		Now: func() time.Time { return d.now }})
	require.NoError(t, err)
	svc, err := apiserver.NewDagService(apiserver.DagServiceConfig{Store: st, Writer: noDagWriter{}, Runs: d.runs, Audit: d.trail,
		Now: func() time.Time { return d.now }})
	require.NoError(t, err)
	srv := serve(t, func(mux *http.ServeMux) { mux.Handle(apiv1connect.NewDagServiceHandler(svc)) })
	d.client = apiv1connect.NewDagServiceClient(srv.Client(), srv.URL)
	return d
}

// putDag stores spec as the definition in force at revision.
func (d *dagTest) putDag(t *testing.T, spec *sundialv1.DagSpec, revision int64) {
	t.Helper()
	raw, err := proto.Marshal(spec)
	require.NoError(t, err)
	_, err = d.store.PutDag(t.Context(), store.Dag{ID: spec.GetId(), Spec: raw, Revision: revision, UpdatedAt: d.now})
	require.NoError(t, err)
}

// failedRun starts a run of alpha.etl due at due and fails its first
// node: the run ends failed, its second node skipped.
func (d *dagTest) failedRun(t *testing.T, due time.Time) string {
	t.Helper()
	id, created, err := d.runs.StartRun(t.Context(), "alpha.etl", due, dagengine.OriginTrigger)
	require.NoError(t, err)
	require.True(t, created)
	_, err = d.runs.Apply(t.Context(), id, dagrun.RunEvent{RunID: dagrun.NodeRunID(id, "extract", 1), Node: "extract", Attempt: 1,
		State: sundialv1.RunState_RUN_STATE_DEAD})
	require.NoError(t, err)
	_, st, err := d.runs.Get(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, dagrun.StatusFailed, st.Status, "the run failed")
	return id
}

// TestPlanDagValidatesAndAppliesNothing: a plan names every problem an
// apply would refuse (a cycle, an unknown parent, a node naming another
// team's job exactly as a missing one), keeps tenancy (another team's DAG
// is not found, a viewer may not plan), refuses a stale revision, and
// produces nothing (the writer panics).
func TestPlanDagValidatesAndAppliesNothing(t *testing.T) {
	t.Parallel()
	d := newDagTest(t)
	ctx := t.Context()
	plan := func(caller string, spec *sundialv1.DagSpec) (*apiv1.PlanDagResponse, error) {
		res, err := d.client.PlanDag(ctx, as(caller, &apiv1.PlanDagRequest{Spec: spec}))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	}
	fields := func(p *apiv1.PlanDagResponse) map[string]string {
		out := map[string]string{}
		for _, e := range p.GetErrors() {
			out[e.GetField()] = e.GetReason()
		}
		return out
	}

	cyclic := etlDag()
	cyclic.Nodes[0].Parents = []string{"load"}
	p, err := plan("owner-admin", cyclic)
	require.NoError(t, err)
	assert.Contains(t, fields(p)["nodes"], "cycle", "%v", p.GetErrors())
	assert.Empty(t, p.GetNodes(), "an invalid definition has no diff")

	unknown := etlDag()
	unknown.Nodes[1].Parents = []string{"extrakt"}
	p, err = plan("owner-admin", unknown)
	require.NoError(t, err)
	assert.Equal(t, `unknown node "extrakt"`, fields(p)["nodes[1].parents[0]"], "%v", p.GetErrors())

	theirs := etlDag()
	theirs.Nodes[0].Job = &sundialv1.DagNode_JobId{JobId: "beta.secret"}
	theirs.Nodes[1].Job = &sundialv1.DagNode_JobId{JobId: "beta.ghost"}
	p, err = plan("owner-admin", theirs)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		"nodes[0].job_id": dag.JobNotFound("beta.secret", "alpha") + ": a node runs a job of the DAG's team; apply the job first",
		"nodes[1].job_id": dag.JobNotFound("beta.ghost", "alpha") + ": a node runs a job of the DAG's team; apply the job first",
	}, fields(p), "another team's job reads as a missing one")

	takeover := etlDag()
	takeover.OwnerTeam = "beta"
	_, err = plan("other", takeover)
	requireConnectCode(t, connect.CodeNotFound, err)
	_, err = plan("owner", etlDag())
	requireConnectCode(t, connect.CodePermissionDenied, err)
	_, err = plan("other", &sundialv1.DagSpec{Id: "alpha.new", OwnerTeam: "alpha", Nodes: etlDag().Nodes})
	requireConnectCode(t, connect.CodePermissionDenied, err)
	_, err = plan("owner-admin", &sundialv1.DagSpec{Id: "alpha.new", Nodes: etlDag().Nodes})
	requireConnectCode(t, connect.CodeInvalidArgument, err)
	stale := int64(0)
	_, err = d.client.PlanDag(ctx, as("owner-admin", &apiv1.PlanDagRequest{Spec: etlDag(), ExpectedRevision: &stale}))
	requireConnectCode(t, connect.CodeFailedPrecondition, err)
	assert.Contains(t, err.Error(), "revision 1")

	// A new DAG: every node and edge is added, and its next fires.
	fresh := etlDag()
	fresh.Id = "alpha.fresh"
	p, err = plan("owner-operator", fresh)
	require.NoError(t, err)
	assert.Empty(t, p.GetErrors())
	assert.True(t, p.GetCreated())
	assert.Len(t, p.GetNodes(), 2)
	require.Len(t, p.GetNextFires(), 5)
	assert.Equal(t, time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC), p.GetNextFires()[0].AsTime())
}

// TestPlanDagShowsTheDiffAndTheRunsItAffects: a plan against the DAG in
// force lists the nodes and edges it adds and the runs not succeeded, with
// whether a resume could take the new definition (not when a node is
// added: the resume rule).
func TestPlanDagShowsTheDiffAndTheRunsItAffects(t *testing.T) {
	t.Parallel()
	d := newDagTest(t)
	run := d.failedRun(t, d.now.Add(-time.Hour))

	same := etlDag()
	same.Description = "nightly, fixed"
	res, err := d.client.PlanDag(t.Context(), as("owner-admin", &apiv1.PlanDagRequest{Spec: same}))
	require.NoError(t, err)
	p := res.Msg
	assert.False(t, p.GetCreated())
	assert.Equal(t, int64(1), p.GetRevision())
	require.Len(t, p.GetChanges(), 1)
	assert.Equal(t, "description", p.GetChanges()[0].GetField())
	require.Len(t, p.GetRuns(), 1)
	assert.Equal(t, run, p.GetRuns()[0].GetDagRunId())
	assert.True(t, p.GetRuns()[0].GetSameShape())
	assert.True(t, p.GetRuns()[0].GetResumable())

	grown := etlDag()
	grown.Nodes = append(grown.Nodes, &sundialv1.DagNode{Id: "report", Job: &sundialv1.DagNode_JobId{JobId: "alpha.report"}, Parents: []string{"load"}})
	res, err = d.client.PlanDag(t.Context(), as("owner-admin", &apiv1.PlanDagRequest{Spec: grown}))
	require.NoError(t, err)
	p = res.Msg
	require.Len(t, p.GetNodes(), 1)
	assert.Equal(t, "report", p.GetNodes()[0].GetNodeId())
	assert.Equal(t, "added", p.GetNodes()[0].GetChange())
	require.Len(t, p.GetEdges(), 1)
	assert.Equal(t, []string{"load", "report", "added"}, []string{p.GetEdges()[0].GetParent(), p.GetEdges()[0].GetChild(), p.GetEdges()[0].GetChange()})
	require.Len(t, p.GetRuns(), 1)
	assert.False(t, p.GetRuns()[0].GetSameShape())
	assert.Contains(t, p.GetRuns()[0].GetReason(), `node "report": added to the DAG since the run started`)
}

// TestResumeDagRunFromTheAPI: a team admin resumes a failed DAG run, which
// reruns its failed node with a new run id and is audited; another team's
// admin finds no such run, a viewer and an operator may not; a run with
// nothing to resume, or whose DAG changed shape, is refused and left as
// it was.
func TestResumeDagRunFromTheAPI(t *testing.T) {
	t.Parallel()
	d := newDagTest(t)
	ctx := t.Context()
	run := d.failedRun(t, d.now.Add(-time.Hour))
	resume := func(caller, id string) (*apiv1.ResumeDagRunResponse, error) {
		res, err := d.client.ResumeDagRun(ctx, as(caller, &apiv1.ResumeDagRunRequest{DagRunId: id}))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	}

	got, err := d.client.GetDagRun(ctx, as("owner", &apiv1.GetDagRunRequest{DagRunId: run}))
	require.NoError(t, err)
	assert.True(t, got.Msg.GetDagRun().GetResumable(), "a failed run is resumable")

	_, err = resume("other", run)
	requireConnectCode(t, connect.CodeNotFound, err)
	_, err = resume("other", "alpha.etl@1")
	requireConnectCode(t, connect.CodeNotFound, err)
	_, err = resume("owner", run)
	requireConnectCode(t, connect.CodePermissionDenied, err)
	_, err = resume("owner-operator", run)
	requireConnectCode(t, connect.CodePermissionDenied, err)
	_, err = resume("owner-admin", "")
	requireConnectCode(t, connect.CodeInvalidArgument, err)
	assert.Empty(t, d.trail.all(), "nothing refused is audited")
	enqueued := len(d.queue.enqueued())

	r, err := resume("owner-admin", run)
	require.NoError(t, err)
	assert.Equal(t, []string{"extract"}, r.GetRerun())
	assert.Equal(t, "running", r.GetDagRun().GetRun().GetStatus())
	assert.True(t, r.GetDagRun().GetRun().GetActive())
	assert.Equal(t, int32(1), r.GetDagRun().GetResumes())
	assert.False(t, r.GetDagRun().GetResumable())
	assert.Equal(t, []string{dagrun.NodeRunID(run, "extract", 2)}, d.queue.enqueued()[enqueued:], "the failed node runs again under a new run id")
	recs := d.trail.all()
	require.Len(t, recs, 1)
	assert.Equal(t, apiserver.AuditDagRunResumed, recs[0].Action)
	assert.Equal(t, "alpha.etl", recs[0].Subject, "under the DAG's id, so that its trail lists it")
	assert.Equal(t, "run "+run+" through the API; reran extract", recs[0].Detail)
	assert.Equal(t, "alpha", recs[0].Team)
	assert.Equal(t, "token:owner-admin", recs[0].Actor)

	_, err = resume("owner-admin", run)
	requireConnectCode(t, connect.CodeFailedPrecondition, err)
	assert.Contains(t, err.Error(), "nothing to resume")

	// A DAG that changed shape since a run started refuses its resume,
	// naming the node, and leaves the run failed.
	second := d.failedRun(t, d.now.Add(-30*time.Minute))
	grown := etlDag()
	grown.Nodes = append(grown.Nodes, &sundialv1.DagNode{Id: "report", Job: &sundialv1.DagNode_JobId{JobId: "alpha.report"}, Parents: []string{"load"}})
	d.putDag(t, grown, 2)
	_, err = resume("cluster-admin", second)
	requireConnectCode(t, connect.CodeFailedPrecondition, err)
	assert.Contains(t, err.Error(), `node "report": added to the DAG since the run started`)
	_, st, err := d.runs.Get(ctx, second)
	require.NoError(t, err)
	assert.Equal(t, dagrun.StatusFailed, st.Status, "a refused resume leaves the run as it was")
	assert.Len(t, d.trail.all(), 1)
}

// TestPlanDagHidesAnotherTeamsRuns: a DAG id that another team used before
// (its DAG deleted, the id taken again) keeps that team's runs; a plan of
// the new owner lists none of them, as GetDagRun hides them.
func TestPlanDagHidesAnotherTeamsRuns(t *testing.T) {
	t.Parallel()
	d := newDagTest(t)
	ctx := t.Context()
	theirs := &sundialv1.DagSpec{Id: "shared.etl", OwnerTeam: "beta", Nodes: []*sundialv1.DagNode{
		{Id: "extract", Job: &sundialv1.DagNode_JobId{JobId: "beta.secret"}}}}
	d.putDag(t, theirs, 1)
	id, _, err := d.runs.StartRun(ctx, "shared.etl", d.now.Add(-time.Hour), dagengine.OriginTrigger)
	require.NoError(t, err)
	_, err = d.runs.Apply(ctx, id, dagrun.RunEvent{RunID: dagrun.NodeRunID(id, "extract", 1), Node: "extract", Attempt: 1,
		State: sundialv1.RunState_RUN_STATE_DEAD})
	require.NoError(t, err)
	ours := &sundialv1.DagSpec{Id: "shared.etl", OwnerTeam: "alpha", Nodes: []*sundialv1.DagNode{
		{Id: "extract", Job: &sundialv1.DagNode_JobId{JobId: "alpha.extract"}}}}
	d.putDag(t, ours, 2)

	res, err := d.client.PlanDag(ctx, as("owner-admin", &apiv1.PlanDagRequest{Spec: ours}))
	require.NoError(t, err)
	assert.Empty(t, res.Msg.GetErrors())
	assert.Empty(t, res.Msg.GetRuns(), "another team's run is not listed")
	res, err = d.client.PlanDag(ctx, as("cluster-admin", &apiv1.PlanDagRequest{Spec: ours}))
	require.NoError(t, err)
	require.Len(t, res.Msg.GetRuns(), 1, "the cluster admin sees every team's runs")
	assert.Equal(t, id, res.Msg.GetRuns()[0].GetDagRunId())
	assert.False(t, res.Msg.GetRuns()[0].GetSameShape(), "another team's run cannot take the definition")
}

// producedDags is a DagWriter that keeps the definitions produced and
// answers each accepted.
type producedDags struct {
	mu    sync.Mutex
	specs []*sundialv1.DagSpec
}

func (w *producedDags) ApplyDag(_ context.Context, spec *sundialv1.DagSpec) (client.Receipt, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.specs = append(w.specs, proto.CloneOf(spec))
	return client.Receipt{ID: spec.GetId(), Topic: "sundial.jobs", Offset: int64(len(w.specs))}, nil
}

func (w *producedDags) DeleteDag(context.Context, string) (client.Receipt, error) {
	panic("not called")
}

func (w *producedDags) WaitStatus(_ context.Context, rs ...client.Receipt) ([]*sundialv1.JobStatus, error) {
	out := make([]*sundialv1.JobStatus, 0, len(rs))
	for _, r := range rs {
		out = append(out, &sundialv1.JobStatus{Subject: &sundialv1.JobStatus_DagId{DagId: r.ID}, Accepted: true,
			Outcome: sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UPDATED})
	}
	return out, nil
}

func (w *producedDags) produced() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.specs)
}

// TestApplyDagChecksTheExpectedRevision: ApplyDag with the revision the
// editor read produces the definition; with a revision changed since, or 0
// (a create) over a DAG in force, it is refused naming the revision in
// force, and nothing is produced. Without one it applies as before.
func TestApplyDagChecksTheExpectedRevision(t *testing.T) {
	t.Parallel()
	st, err := memory.New(memory.Options{})
	require.NoError(t, err)
	d := &dagTest{store: st, now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	_, err = st.InitCluster(t.Context(), 4)
	require.NoError(t, err)
	for _, id := range []string{"alpha.extract", "alpha.load"} {
		raw, err := proto.Marshal(&sundialv1.JobSpec{Id: id, OwnerTeam: "alpha"})
		require.NoError(t, err)
		_, err = st.UpsertJob(t.Context(), store.Job{ID: id, Spec: raw, Revision: 1, UpdatedAt: d.now})
		require.NoError(t, err)
	}
	d.putDag(t, etlDag(), 7)
	w := &producedDags{}
	svc, err := apiserver.NewDagService(apiserver.DagServiceConfig{Store: st, Writer: w})
	require.NoError(t, err)
	srv := serve(t, func(mux *http.ServeMux) { mux.Handle(apiv1connect.NewDagServiceHandler(svc)) })
	c := apiv1connect.NewDagServiceClient(srv.Client(), srv.URL)
	apply := func(expected *int64) error {
		_, err := c.ApplyDag(t.Context(), as("owner-admin", &apiv1.ApplyDagRequest{Spec: etlDag(), ExpectedRevision: expected}))
		return err
	}
	rev := func(r int64) *int64 { return &r }

	err = apply(rev(6))
	requireConnectCode(t, connect.CodeFailedPrecondition, err)
	assert.Contains(t, err.Error(), "the revision in force is 7")
	err = apply(rev(0))
	requireConnectCode(t, connect.CodeFailedPrecondition, err)
	assert.Contains(t, err.Error(), "a definition is in force, revision 7")
	assert.Zero(t, w.produced(), "a stale apply produces nothing")

	require.NoError(t, apply(rev(7)))
	assert.Equal(t, 1, w.produced())
	require.NoError(t, apply(nil))
	assert.Equal(t, 2, w.produced())
}

// dagsDown is a store whose DAG definitions cannot be read.
type dagsDown struct{ *memory.Store }

func (dagsDown) GetDag(context.Context, string) (store.Dag, error) {
	return store.Dag{}, errors.New("read timeout at 10.0.0.7:9042")
}

// TestResumeDagRunThatSavedNothing: a resume that fails before anything is
// saved (the DAG's definition cannot be read) answers unavailable without
// the backend's words, is not audited, and leaves the run as it was.
func TestResumeDagRunThatSavedNothing(t *testing.T) {
	t.Parallel()
	d := newDagTest(t)
	ctx := t.Context()
	run := d.failedRun(t, d.now.Add(-time.Hour))
	runs, err := dagengine.NewRuns(dagengine.RunsConfig{Store: dagsDown{d.store}, Enqueuer: d.queue, Producer: acked{}, Shards: 4,
		Now: func() time.Time { return d.now }})
	require.NoError(t, err)
	trail := &recorded{}
	svc, err := apiserver.NewDagService(apiserver.DagServiceConfig{Store: d.store, Writer: noDagWriter{}, Runs: runs, Audit: trail,
		Now: func() time.Time { return d.now }})
	require.NoError(t, err)
	srv := serve(t, func(mux *http.ServeMux) { mux.Handle(apiv1connect.NewDagServiceHandler(svc)) })
	c := apiv1connect.NewDagServiceClient(srv.Client(), srv.URL)

	_, err = c.ResumeDagRun(ctx, as("owner-admin", &apiv1.ResumeDagRunRequest{DagRunId: run}))
	requireConnectCode(t, connect.CodeUnavailable, err)
	assert.NotContains(t, err.Error(), "10.0.0.7", "the backend's words stay in the server's log")
	assert.Empty(t, trail.all(), "a resume that did not happen is not audited")
	_, st, err := d.runs.Get(ctx, run)
	require.NoError(t, err)
	assert.Equal(t, dagrun.StatusFailed, st.Status)
	assert.Zero(t, st.Resumes)
}
