package dagengine_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/dagengine"
	"github.com/sundialhq/sundial/dagengine/dag"
	"github.com/sundialhq/sundial/dagengine/dagrun"
	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/target"
	"github.com/sundialhq/sundial/store"
)

// lockedBuffer collects an engine's log.
type lockedBuffer struct{ testenv.SyncBuffer }

// lines returns the logged lines that contain s.
func (b *lockedBuffer) lines(s string) []string {
	var out []string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// loggedEngine starts an engine instance whose info log goes to log.
func (s *stack) loggedEngine(group string, enq dagengine.Enqueuer, log *lockedBuffer) *dagengine.Engine {
	s.t.Helper()
	if enq == nil {
		enq = s.enq
	}
	e, err := dagengine.New(dagengine.Config{
		Kafka: []kgo.Opt{kgo.SeedBrokers(s.brokers...)}, Topics: s.names,
		Group: group, DefinitionsGroup: group + "-definitions",
		Store: s.store, Enqueuer: enq, Producer: s.client, Shards: testShards,
		SweepInterval: time.Second, RedriveAfter: 2 * time.Second, RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond,
		Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	require.NoError(s.t, err)
	require.NoError(s.t, e.Start(s.ctx))
	s.t.Cleanup(e.Stop)
	return e
}

// putTeamJob stores a job of team whose target is the runner handler.
func (s *stack) putTeamJob(id, team, handler string) {
	s.t.Helper()
	spec := &sundialv1.JobSpec{Id: id, OwnerTeam: team, Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: handler}}}}
	b, err := proto.Marshal(spec)
	require.NoError(s.t, err)
	_, err = s.store.UpsertJob(s.ctx, store.Job{ID: id, Spec: b, Revision: 7, UpdatedAt: time.Now()})
	require.NoError(s.t, err)
}

// TestDagCannotRunAnotherTeamsJob: team A's DAG names, as job_id nodes,
// A's own job, B's job, a job stored with an id of A's shape but owned by
// B, and an id that does not exist. A real dispatcher and runner execute
// what the engine enqueues. Only A's job runs; B's target is never called;
// the three other nodes fail alike, with reason job_not_found and one
// error text, so A cannot tell B's job from a missing one.
func TestDagCannotRunAnotherTeamsJob(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("real stack")
	}
	s := setup(t)
	var mine, theirs atomic.Int32
	s.dispatchAndRun(map[string]target.Handler{
		"a-work":   target.HandlerFunc(func(context.Context, *sundialv1.Run) error { mine.Add(1); return nil }),
		"b-secret": target.HandlerFunc(func(context.Context, *sundialv1.Run) error { theirs.Add(1); return nil }),
	})
	log := &lockedBuffer{}
	e := s.loggedEngine(s.names.Prefix+"teams", nil, log)

	s.putTeamJob("team-a.work", "team-a", "a-work")
	s.putTeamJob("team-b.secret", "team-b", "b-secret")
	s.putTeamJob("team-a.squatted", "team-b", "b-secret") // the stored owner decides, not the id
	jobNode := func(id, job string) *sundialv1.DagNode {
		return &sundialv1.DagNode{Id: id, Job: &sundialv1.DagNode_JobId{JobId: job}}
	}
	s.putDag(&sundialv1.DagSpec{Id: "team-a.steal", OwnerTeam: "team-a",
		FailurePolicy: sundialv1.DagFailurePolicy_DAG_FAILURE_POLICY_CONTINUE_INDEPENDENT,
		Nodes: []*sundialv1.DagNode{
			jobNode("mine", "team-a.work"), jobNode("theirs", "team-b.secret"),
			jobNode("squatted", "team-a.squatted"), jobNode("ghost", "team-b.ghost"),
		}})

	id, _, err := e.Runs().StartRun(s.ctx, "team-a.steal", time.Now(), dagengine.OriginTrigger)
	require.NoError(t, err)
	st := s.waitStatus(id, "failed", time.Minute)
	phases := map[string]string{}
	for _, n := range st.Nodes {
		phases[n.ID] = n.Phase.String() + " " + n.Reason
	}
	t.Logf("node phases: %v", phases)
	assert.Equal(t, dagrun.Succeeded, st.Nodes[0].Phase, "A's own job runs")
	for _, n := range st.Nodes[1:] {
		assert.Equal(t, dagrun.Failed, n.Phase, n.ID)
		assert.Equal(t, "job_not_found", n.Reason, n.ID)
	}
	assert.Equal(t, int32(1), mine.Load())
	assert.Zero(t, theirs.Load(), "B's target was called by A's DAG")

	for node, job := range map[string]string{"theirs": "team-b.secret", "squatted": "team-a.squatted", "ghost": "team-b.ghost"} {
		want := dag.JobNotFound(job, "team-a")
		got := log.lines("node=" + node + " ")
		require.NotEmpty(t, got, "no log of node %s", node)
		assert.Contains(t, got[0], `err="`+strings.ReplaceAll(want, `"`, `\"`)+`"`, "node %s", node)
		t.Logf("node %s: %s", node, got[0])
	}
}

// TestDagInlineNodeCannotChargeAnotherTeam: team A's DAG whose inline node
// names team B as owner_team is refused by the engine (field
// nodes[0].inline.owner_team) and not stored. One stored before the rule
// cannot start a run. A valid DAG's node runs are owned by A. Nothing is
// enqueued for B, so nothing lands in B's quota or dead letters.
func TestDagInlineNodeCannotChargeAnotherTeam(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("real stack")
	}
	s := setup(t)
	enq := &fakeEnqueuer{entries: map[string]store.DueEntry{}, calls: map[string]int{}}
	e := s.loggedEngine(s.names.Prefix+"charge", enq, &lockedBuffer{})

	def := func(id, inlineTeam string) string {
		return `{"id":"` + id + `","ownerTeam":"team-a","nodes":[{"id":"h","inline":{"ownerTeam":"` + inlineTeam + `","target":{"handler":{"name":"noop"}}}}]}`
	}
	// Team A's own topic: ownership is enforced by default.
	_, err := topics.Ensure(s.ctx, kadm.NewClient(s.client), []topics.Spec{s.names.TeamJobsSpec("team-a")}, 1)
	require.NoError(t, err)
	rec := func(id, value string) *kgo.Record {
		return &kgo.Record{Topic: s.names.TeamJobs("team-a"), Key: []byte(id), Value: []byte(value), Headers: []kgo.RecordHeader{
			{Key: sundialv1.HeaderKind, Value: []byte(sundialv1.KindDag)}, {Key: sundialv1.HeaderContentType, Value: []byte("application/json")},
		}}
	}
	recs := []*kgo.Record{rec("team-a.hog", def("team-a.hog", "team-b")), rec("team-a.fine", def("team-a.fine", ""))}
	for _, r := range recs {
		require.NoError(t, s.client.ProduceSync(s.ctx, r).FirstErr())
	}
	got := s.answers(recs...)
	t.Logf("answer: %v", got[0])
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_REJECTED, got[0].GetOutcome(), "%v", got[0])
	require.Len(t, got[0].GetErrors(), 1, "%v", got[0])
	assert.Equal(t, "nodes[0].inline.owner_team", got[0].GetErrors()[0].GetField())
	assert.Contains(t, got[0].GetErrors()[0].GetReason(), `"team-b": leave it empty or set it to "team-a"`)
	_, err = s.store.GetDag(s.ctx, "team-a.hog")
	require.ErrorIs(t, err, store.ErrNotFound, "the refused DAG is not stored")
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED, got[1].GetOutcome(), "%v", got[1])

	// A definition stored before the rule does not start.
	legacy := &sundialv1.DagSpec{Id: "team-a.legacy", OwnerTeam: "team-a", Nodes: []*sundialv1.DagNode{{Id: "h", Job: &sundialv1.DagNode_Inline{Inline: &sundialv1.JobSpec{
		OwnerTeam: "team-b", Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "noop"}}},
	}}}}}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(legacy)
	require.NoError(t, err)
	_, err = s.store.PutDag(s.ctx, store.Dag{ID: legacy.GetId(), Spec: b, Revision: 1, UpdatedAt: time.Now()})
	require.NoError(t, err)
	_, _, err = e.Runs().StartRun(s.ctx, "team-a.legacy", time.Now(), dagengine.OriginTrigger)
	require.Error(t, err)
	t.Logf("legacy DAG: %v", err)

	id, _, err := e.Runs().StartRun(s.ctx, "team-a.fine", time.Now(), dagengine.OriginTrigger)
	require.NoError(t, err)
	require.True(t, eventually(s.ctx, time.Minute, func() bool { return len(enq.runIDs()) > 0 }), "no node run enqueued")
	enq.mu.Lock()
	defer enq.mu.Unlock()
	require.Len(t, enq.entries, 1)
	for runID, entry := range enq.entries {
		assert.Equal(t, id+"/h", runID)
		run := &sundialv1.Run{}
		require.NoError(t, proto.Unmarshal(entry.Payload, run))
		assert.Equal(t, "team-a", run.GetOwnerTeam(), "the node run is the DAG's team's")
	}
}
