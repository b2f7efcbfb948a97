package dagengine_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sundialhq/sundial/dagengine"
	"github.com/sundialhq/sundial/dagengine/dag"
	"github.com/sundialhq/sundial/dagengine/dagrun"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

func node(id string, parents ...string) *sundialv1.DagNode {
	return &sundialv1.DagNode{Id: id, Job: &sundialv1.DagNode_JobId{JobId: "job." + id}, Parents: parents}
}

// fanDag is root -> m1..mN -> join, with node ids prefixed by the DAG id
// so that DAGs of different scenarios never share a node id or a job.
func fanDag(id string, n int) *sundialv1.DagSpec {
	spec := &sundialv1.DagSpec{Id: id, OwnerTeam: "test", Nodes: []*sundialv1.DagNode{node(id + "-root")}}
	var mids []string
	for i := 1; i <= n; i++ {
		m := fmt.Sprintf("%s-m%d", id, i)
		mids = append(mids, m)
		spec.Nodes = append(spec.Nodes, node(m, id+"-root"))
	}
	spec.Nodes = append(spec.Nodes, node(id+"-join", mids...))
	return spec
}

func (s *stack) putJobs(spec *sundialv1.DagSpec) {
	for _, n := range spec.GetNodes() {
		if id := n.GetJobId(); id != "" {
			s.putJob(id)
		}
	}
}

// TestOnRealStack runs the engine on Kafka and Cassandra. A keyspace and
// topics take many seconds to make and drop, so the scenarios share one
// stack and one simulated runner; each has DAGs, nodes and engine
// instances (consumer groups) of its own, and stops its instances before
// the next begins. A group that joins later reads the earlier scenarios'
// events too; they belong to ended DAG runs and change nothing.
func TestOnRealStack(t *testing.T) {
	t.Parallel()
	s := setup(t)
	sim := s.runner([]string{"bad"}, []string{"hang", "crash-root"})
	for _, sc := range []struct {
		name string
		fn   func(*stack, *simRunner)
	}{
		{"Definitions", testDefinitions},
		{"TeamOwnership", testTeamOwnership},
		{"FailureAndResume", testFailureAndResume},
		{"ResumeTakesTheCurrentDefinition", testResumeTakesTheCurrentDefinition},
		{"StuckNode", testStuckNode},
		{"TwoEnginesSeeTheSameEvents", testTwoEngines},
		{"EngineKilledMidDag", testEngineKilled},
		// Last: groups that join later read its bad records too.
		{"PoisonEventsAreSkipped", testPoisonEvents},
	} {
		t.Run(sc.name, func(t *testing.T) {
			sub := *s
			sub.t = t
			sc.fn(&sub, sim)
		})
	}
}

// testDefinitions produces DAG definitions to sundial.jobs and reads the
// engine's answers on sundial.jobs.status.
func testDefinitions(s *stack, _ *simRunner) {
	t := s.t
	s.engine("defs", nil)
	example, err := os.ReadFile("../proto/sundial/v1/testdata/dagspec/nightly-etl.json")
	require.NoError(t, err)
	dagHeaders := func(ct string) []kgo.RecordHeader {
		return []kgo.RecordHeader{{Key: sundialv1.HeaderKind, Value: []byte(sundialv1.KindDag)}, {Key: sundialv1.HeaderContentType, Value: []byte(ct)}}
	}
	recs := []*kgo.Record{
		{Key: []byte("data.daily-etl"), Value: example, Headers: dagHeaders("application/json")},
		{Key: []byte("cyclic"), Headers: dagHeaders("application/json"), Value: []byte(`{"id":"cyclic","ownerTeam":"t","nodes":[
			{"id":"a","jobId":"j","parents":["c"]},{"id":"b","jobId":"j","parents":["a"]},{"id":"c","jobId":"j","parents":["b"]}]}`)},
		{Key: []byte("broken"), Headers: dagHeaders("application/json"), Value: []byte(`{"id":"broken","ownerTeam":"t","nodes":[
			{"id":"a","jobId":"j","parents":["a"]},{"id":"b","jobId":"j","parents":["nope"]},{"id":"a","jobId":"j"}]}`)},
		{Key: []byte("data.daily-etl"), Headers: dagHeaders("")}, // tombstone
		// A job definition is the registry's: no answer from the engine.
		{Key: []byte("some.job"), Value: []byte("{}"), Headers: []kgo.RecordHeader{{Key: sundialv1.HeaderContentType, Value: []byte("application/json")}}},
	}
	for _, r := range recs {
		r.Topic = s.names.Jobs()
		require.NoError(t, s.client.ProduceSync(s.ctx, r).FirstErr())
	}

	statuses := s.readStatuses(4)
	require.Len(t, statuses["data.daily-etl"], 2)
	created := statuses["data.daily-etl"][0]
	assert.Equal(t, "data.daily-etl", created.GetDagId())
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED, created.GetOutcome())
	assert.True(t, created.GetAccepted())
	assert.NotNil(t, created.GetNextDueTime(), "the cron schedule's first due time")

	require.Len(t, statuses["cyclic"], 1)
	cyclic := statuses["cyclic"][0]
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_REJECTED, cyclic.GetOutcome())
	require.Len(t, cyclic.GetErrors(), 1)
	assert.Equal(t, "nodes", cyclic.GetErrors()[0].GetField())
	assert.Contains(t, cyclic.GetErrors()[0].GetReason(), "cycle a -> b -> c -> a")

	require.Len(t, statuses["broken"], 1)
	broken := statuses["broken"][0]
	var fields []string
	for _, fe := range broken.GetErrors() {
		fields = append(fields, fe.GetField()+": "+fe.GetReason())
	}
	assert.Equal(t, []string{
		`nodes[2].id: duplicate node id "a": nodes[0] has it already`,
		`nodes[0].parents[0]: self-edge: node "a" lists itself as a parent`,
		`nodes[1].parents[0]: unknown node "nope"`,
	}, fields)

	deleted := statuses["data.daily-etl"][1]
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_DELETED, deleted.GetOutcome())
	d, err := s.store.GetDag(s.ctx, "data.daily-etl")
	require.NoError(t, err)
	assert.True(t, d.Deleted)
	_, err = s.store.GetDag(s.ctx, "cyclic")
	require.ErrorIs(t, err, store.ErrNotFound, "a rejected definition is not stored")
}

// readStatuses reads n records of sundial.jobs.status and returns them by
// DAG id, in the order of the definitions they answer (the records of one
// key share a partition, so their source offsets order them).
func (s *stack) readStatuses(n int) map[string][]*sundialv1.JobStatus {
	s.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.brokers...), kgo.ConsumeTopics(s.names.JobsStatus()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(s.t, err)
	defer cl.Close()
	out := map[string][]*sundialv1.JobStatus{}
	for got := 0; got < n; {
		ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
		fetches := cl.PollFetches(ctx)
		err := ctx.Err()
		cancel()
		require.NoError(s.t, err, "waiting for %d statuses, have %d", n, got)
		fetches.EachRecord(func(rec *kgo.Record) {
			st := &sundialv1.JobStatus{}
			require.NoError(s.t, sundialv1.Unmarshal(contentTypeOf(rec), rec.Value, st))
			out[st.GetDagId()] = append(out[st.GetDagId()], st)
			got++
		})
	}
	for _, sts := range out {
		slices.SortFunc(sts, func(a, b *sundialv1.JobStatus) int {
			return cmp.Compare(a.GetSource().GetOffset(), b.GetSource().GetOffset())
		})
	}
	return out
}

func contentTypeOf(rec *kgo.Record) string {
	for _, h := range rec.Headers {
		if h.Key == sundialv1.HeaderContentType {
			return string(h.Value)
		}
	}
	return ""
}

// testFailureAndResume runs a DAG whose one branch fails under
// CONTINUE_INDEPENDENT, checks the durable state, the enqueued node runs
// and the published events, then resumes it.
func testFailureAndResume(s *stack, sim *simRunner) {
	t := s.t
	e := s.engine("resume", nil)
	spec := &sundialv1.DagSpec{Id: "test.etl", OwnerTeam: "test",
		FailurePolicy: sundialv1.DagFailurePolicy_DAG_FAILURE_POLICY_CONTINUE_INDEPENDENT,
		Nodes: []*sundialv1.DagNode{
			node("extract"), node("bad", "extract"), node("after-bad", "bad"), node("good", "extract"), node("report", "good"),
		}}
	s.putDag(spec)
	s.putJobs(spec)

	due := time.Now().Truncate(time.Millisecond)
	id, created, err := e.Runs().StartRun(s.ctx, "test.etl", due, dagengine.OriginTrigger)
	require.NoError(t, err)
	require.True(t, created)
	assert.Equal(t, dagrun.RunID("test.etl", due), id)

	st := s.waitStatus(id, "failed", time.Minute)
	phases := map[string]string{}
	for _, n := range st.Nodes {
		phases[n.ID] = n.Phase.String()
	}
	assert.Equal(t, map[string]string{"extract": "succeeded", "bad": "failed", "after-bad": "skipped", "good": "succeeded", "report": "succeeded"}, phases)

	// Every node that ran has its due entry in the store, with the Run.
	for _, n := range st.Nodes {
		if n.Gen == 0 {
			continue
		}
		entries := s.dueEntries("job."+n.ID, n.StartedAt)
		require.Contains(t, entries, n.RunID(id), "due entry of node %s", n.ID)
		assert.Equal(t, store.KindDAG, entries[n.RunID(id)].Kind)
	}
	assert.Equal(t, map[string]int{id + "/extract": 1, id + "/bad": 1, id + "/good": 1, id + "/report": 1}, sim.runIDs(id))

	// Resume: bad runs again as generation 2 and succeeds; nothing that
	// succeeded runs again.
	sim.setFail("bad", false)
	_, err = e.Runs().Resume(s.ctx, id)
	require.NoError(t, err)
	st = s.waitStatus(id, "succeeded", time.Minute)
	assert.Equal(t, map[string]int{id + "/extract": 1, id + "/bad": 1, id + "/good": 1, id + "/report": 1, id + "/bad#2": 1, id + "/after-bad": 1}, sim.runIDs(id))
	_, err = e.Runs().Resume(s.ctx, id)
	require.ErrorIs(t, err, dagrun.ErrNothingToResume)

	var evs []string
	require.True(t, eventually(s.ctx, 30*time.Second, func() bool {
		evs = eventNames(s.dagEvents(id))
		return len(evs) > 0 && evs[len(evs)-1] == "dag:succeeded"
	}), "events: %v", evs)
	for _, want := range []string{"dag:running", "extract:running", "extract:succeeded", "bad:failed", "after-bad:skipped", "dag:failed", "bad:running", "after-bad:succeeded", "dag:succeeded"} {
		assert.Contains(t, evs, want)
	}
	runs, err := s.store.ListDagRuns(s.ctx, "test.etl", 10)
	require.NoError(t, err)
	require.Len(t, runs, 1)
	assert.Equal(t, "succeeded", runs[0].Status)
	assert.Equal(t, "5/5 succeeded", runs[0].Summary)
	assert.Equal(t, dagengine.OriginTrigger, runs[0].Origin)
}

// testResumeTakesTheCurrentDefinition: a DAG run that failed is resumed
// with the DAG's definition as fixed and applied again since, not the one
// the run started with; a definition of another shape (a node added) is
// refused, naming the node, and changes nothing.
func testResumeTakesTheCurrentDefinition(s *stack, _ *simRunner) {
	t := s.t
	e := s.engine("resume-current", nil)
	inline := func(handler string) *sundialv1.DagNode {
		return &sundialv1.DagNode{Id: "fixme", Job: &sundialv1.DagNode_Inline{Inline: &sundialv1.JobSpec{
			Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: handler}}}}}}
	}
	put := func(revision int64, nodes ...*sundialv1.DagNode) {
		spec := &sundialv1.DagSpec{Id: "test.fixable", OwnerTeam: "test", Nodes: nodes}
		_, errs := dag.Compile(spec, dag.Options{})
		require.Empty(t, errs)
		b, err := dag.Marshal(spec)
		require.NoError(t, err)
		_, err = s.store.PutDag(s.ctx, store.Dag{ID: spec.GetId(), Spec: b, Revision: revision, UpdatedAt: time.Now()})
		require.NoError(t, err)
	}
	s.putJob("job.fixable-after")
	after := &sundialv1.DagNode{Id: "after", Parents: []string{"fixme"}, Job: &sundialv1.DagNode_JobId{JobId: "job.fixable-after"}}
	put(1, inline("broken"), after)

	due := time.Now().Truncate(time.Millisecond)
	id, created, err := e.Runs().StartRun(s.ctx, "test.fixable", due, dagengine.OriginTrigger)
	require.NoError(t, err)
	require.True(t, created)
	s.waitStatus(id, "failed", 3*time.Minute)

	// Another shape: refused, naming the node; the run stays failed.
	extra := &sundialv1.DagNode{Id: "extra", Job: &sundialv1.DagNode_JobId{JobId: "job.fixable-after"}}
	put(2, inline("fixed"), after, extra)
	_, err = e.Runs().Resume(s.ctx, id)
	require.ErrorIs(t, err, dagengine.ErrNotResumable)
	require.ErrorIs(t, err, dag.ErrIncompatible)
	assert.ErrorContains(t, err, `node "extra": added`)
	_, st := s.state(id)
	assert.Equal(t, dagrun.StatusFailed, st.Status)
	assert.Equal(t, 0, st.Resumes)

	// Fixed, in the same shape (listed in another order): the rerun runs
	// the fix, and the run succeeds.
	put(3, after, inline("fixed"))
	_, err = e.Runs().Resume(s.ctx, id)
	require.NoError(t, err)
	st = s.waitStatus(id, "succeeded", 3*time.Minute)
	var fix dagrun.Node
	for _, n := range st.Nodes {
		if n.ID == "fixme" {
			fix = n
		}
	}
	require.Equal(t, 2, fix.Gen, "the failed node ran again")
	entries := s.dueEntries("test.fixable/fixme", fix.StartedAt)
	require.Contains(t, entries, fix.RunID(id))
	run := &sundialv1.Run{}
	require.NoError(t, proto.Unmarshal(entries[fix.RunID(id)].Payload, run))
	assert.Equal(t, "fixed", run.GetTarget().GetHandler().GetName(), "the rerun runs the DAG's current definition")
	row, _ := s.state(id)
	var b bytes.Buffer
	require.NoError(t, dagengine.WriteRun(&b, row, st, dag.Options{}))
	assert.Contains(t, b.String(), "fixme")
}

// dueEntries returns the KindDAG entries of a job in the bucket of at, by
// run id.
func (s *stack) dueEntries(jobID string, at time.Time) map[string]store.DueEntry {
	s.t.Helper()
	out := map[string]store.DueEntry{}
	for e, err := range s.store.ListBucket(s.ctx, store.BucketOf(at), store.ShardOf(jobID, testShards)) {
		require.NoError(s.t, err)
		if e.JobID == jobID {
			out[e.RunID] = e
		}
	}
	return out
}

// testTwoEngines runs two engine instances in different consumer groups,
// so both read every event, over a fan-out and fan-in: each node is started
// by exactly one saved decision.
func testTwoEngines(s *stack, sim *simRunner) {
	t := s.t
	const width = 30
	spec := fanDag("fan", width)
	s.putDag(spec)
	s.putJobs(spec)
	a := s.engine("two-a", nil)
	b := s.engine("two-b", nil)

	start := time.Now()
	id, _, err := a.Runs().StartRun(s.ctx, "fan", time.Now(), dagengine.OriginTrigger)
	require.NoError(t, err)
	t.Logf("started in %v", time.Since(start))
	st := s.waitStatus(id, "succeeded", 2*time.Minute)
	t.Logf("succeeded after %v", time.Since(start))
	for _, n := range st.Nodes {
		assert.Equal(t, 1, n.Gen, "node %s started once", n.ID)
	}
	runs := sim.runIDs(id)
	assert.Len(t, runs, width+2, "one run id per node")
	// Both instances applied events, and together they saved each start
	// exactly once (the counter counts saved transitions only).
	assert.Equal(t, width+2, a.nodesStarted()+b.nodesStarted(), "starts saved by a (%d) and b (%d)", a.nodesStarted(), b.nodesStarted())
	appliedA := metricSum(a.reg, "sundial_dagengine_run_events_total", "applied") + metricSum(a.reg, "sundial_dagengine_run_events_total", "ignored")
	appliedB := metricSum(b.reg, "sundial_dagengine_run_events_total", "applied") + metricSum(b.reg, "sundial_dagengine_run_events_total", "ignored")
	assert.Positive(t, appliedA)
	assert.Positive(t, appliedB)
	t.Logf("events read: a %v, b %v; version conflicts: a %v, b %v", appliedA, appliedB,
		metricSum(a.reg, "sundial_dagengine_version_conflicts_total", ""), metricSum(b.reg, "sundial_dagengine_version_conflicts_total", ""))
}

// gate is an Enqueuer that fails while closed, as if the engine's process
// could no longer reach the store or Kafka.
type gate struct {
	next   dagengine.Enqueuer
	closed atomic.Bool
	mu     sync.Mutex
	failed int
}

func (g *gate) Enqueue(ctx context.Context, entries ...store.DueEntry) error {
	if g.closed.Load() {
		g.mu.Lock()
		g.failed++
		g.mu.Unlock()
		return errors.New("enqueue unreachable")
	}
	return g.next.Enqueue(ctx, entries...)
}

// testEngineKilled stops an engine after it saved the decision to start
// nodes but before it could enqueue them, and starts another: the new
// instance finishes the DAG run, and no node is started twice.
func testEngineKilled(s *stack, sim *simRunner) {
	t := s.t
	const width = 10
	spec := fanDag("crash", width)
	s.putDag(spec)
	s.putJobs(spec)
	g := &gate{next: s.enq}
	first := s.engine("killed", g)

	id, _, err := first.Runs().StartRun(s.ctx, "crash", time.Now(), dagengine.OriginTrigger)
	require.NoError(t, err)
	sim.waitHeld(t, "crash-root")

	// The enqueue path dies; root succeeds; the engine saves the fan-out
	// as starting and cannot carry it out.
	g.closed.Store(true)
	sim.release(t, "crash-root", false)
	require.True(t, eventually(s.ctx, time.Minute, func() bool {
		_, st := s.state(id)
		return st.Nodes[1].Phase == dagrun.Starting
	}), "the fan-out is saved as starting")
	require.True(t, eventually(s.ctx, 30*time.Second, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.failed > 0
	}))
	first.Stop() // killed: its offsets stay uncommitted, its work undone

	_, st := s.state(id)
	for _, n := range st.Nodes[1 : width+1] {
		require.Equal(t, dagrun.Starting, n.Phase, "node %s", n.ID)
	}
	second := s.engine("killed", nil)
	st = s.waitStatus(id, "succeeded", 2*time.Minute)
	for _, n := range st.Nodes {
		assert.Equal(t, 1, n.Gen, "node %s started once", n.ID)
	}
	runs := sim.runIDs(id)
	assert.Len(t, runs, width+2)
	for runID, deliveries := range runs {
		assert.Equal(t, 1, deliveries, "run %s delivered once", runID)
	}
	assert.Equal(t, width+1, first.nodesStarted(), "the first instance saved the starts of root and the fan-out")
	assert.Equal(t, 1, second.nodesStarted(), "the second instance saved only the join's")
}

// testStuckNode: a node past its timeout is marked timed out and its DAG
// run stuck, by the engine's timer, with events.
func testStuckNode(s *stack, sim *simRunner) {
	t := s.t
	e := s.engine("stuck", nil)
	spec := &sundialv1.DagSpec{Id: "test.slow", OwnerTeam: "test", Nodes: []*sundialv1.DagNode{
		{Id: "hang", Job: &sundialv1.DagNode_JobId{JobId: "job.hang"}, Timeout: durationpb.New(2 * time.Second)},
		node("after", "hang"),
	}}
	s.putDag(spec)
	s.putJobs(spec)

	id, _, err := e.Runs().StartRun(s.ctx, "test.slow", time.Now(), dagengine.OriginTrigger)
	require.NoError(t, err)
	sim.waitHeld(t, "hang")
	st := s.waitStatus(id, "timed_out", 30*time.Second)
	assert.True(t, st.Stuck)
	assert.Equal(t, dagrun.TimedOut, st.Nodes[0].Phase)
	assert.Equal(t, dagrun.Skipped, st.Nodes[1].Phase)
	var evs []string
	require.True(t, eventually(s.ctx, 30*time.Second, func() bool {
		evs = eventNames(s.dagEvents(id))
		return len(evs) > 0 && evs[len(evs)-1] == "dag:timed_out"
	}), "events: %v", evs)
	assert.Contains(t, evs, "hang:timed_out")

	// The late success of the stuck run changes nothing.
	sim.release(t, "hang", false)
	// Resume reruns it with a new run id.
	_, err = e.Runs().Resume(s.ctx, id)
	require.NoError(t, err)
	st = s.waitStatus(id, "succeeded", time.Minute)
	assert.Equal(t, 2, st.Nodes[0].Gen)
	assert.Contains(t, sim.runIDs(id), id+"/hang#2")
}

// testPoisonEvents puts records on sundial.events that do not decode ahead
// of a DAG's node events, in the partitions those events go to: each is
// counted as malformed and skipped, and the DAG completes from the events
// behind them.
func testPoisonEvents(s *stack, _ *simRunner) {
	t := s.t
	e := s.engine("poison", nil)
	spec := &sundialv1.DagSpec{Id: "test.poisoned", OwnerTeam: "test", Nodes: []*sundialv1.DagNode{node("p-first"), node("p-second", "p-first")}}
	s.putDag(spec)
	s.putJobs(spec)
	for _, n := range spec.GetNodes() {
		rec := &kgo.Record{Topic: s.names.Events(), Key: []byte(n.GetJobId()), Value: []byte{0xff, 0xff, 0xff},
			Headers: []kgo.RecordHeader{{Key: sundialv1.HeaderKind, Value: []byte(sundialv1.KindRunEvent)}}}
		require.NoError(t, s.client.ProduceSync(s.ctx, rec).FirstErr())
	}
	id, created, err := e.Runs().StartRun(s.ctx, "test.poisoned", time.Now().Truncate(time.Millisecond), dagengine.OriginTrigger)
	require.NoError(t, err)
	require.True(t, created)
	s.waitStatus(id, "succeeded", 5*time.Minute)
	var malformed float64
	require.True(t, eventually(s.ctx, time.Minute, func() bool {
		malformed = metricSum(e.reg, "sundial_dagengine_run_events_total", "malformed")
		return malformed >= float64(len(spec.GetNodes()))
	}), "malformed events counted: %v", malformed)
}
