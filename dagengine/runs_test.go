package dagengine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/dagengine"
	"github.com/sundialhq/sundial/dagengine/dag"
	"github.com/sundialhq/sundial/dagengine/dagrun"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/memory"
)

// fakeEnqueuer records entries; it fails while down is set.
type fakeEnqueuer struct {
	mu      sync.Mutex
	entries map[string]store.DueEntry // by run id
	calls   map[string]int
	down    atomic.Bool
}

func (f *fakeEnqueuer) Enqueue(_ context.Context, entries ...store.DueEntry) error {
	if f.down.Load() {
		return errors.New("down")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range entries {
		f.entries[e.RunID] = e
		f.calls[e.RunID]++
	}
	return nil
}

func (f *fakeEnqueuer) runIDs() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for k, v := range f.calls {
		out[k] = v
	}
	return out
}

// fakeProducer records DagRunEvents.
type fakeProducer struct {
	mu     sync.Mutex
	events []*sundialv1.DagRunEvent
}

func (f *fakeProducer) ProduceSync(_ context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out kgo.ProduceResults
	for _, r := range rs {
		ev := &sundialv1.DagRunEvent{}
		err := proto.Unmarshal(r.Value, ev)
		f.events = append(f.events, ev)
		out = append(out, kgo.ProduceResult{Record: r, Err: err})
	}
	return out
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type memSetup struct {
	store *memory.Store
	clock *clock
	enq   *fakeEnqueuer
	prod  *fakeProducer
}

func memStack(t *testing.T) *memSetup {
	t.Helper()
	c := &clock{now: time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)}
	st, err := memory.New(memory.Options{Now: c.Now})
	require.NoError(t, err)
	_, err = st.InitCluster(t.Context(), 4)
	require.NoError(t, err)
	return &memSetup{store: st, clock: c, enq: &fakeEnqueuer{entries: map[string]store.DueEntry{}, calls: map[string]int{}}, prod: &fakeProducer{}}
}

// runs returns a Runs as one process would have it.
func (m *memSetup) runs(t *testing.T, enq dagengine.Enqueuer) (*dagengine.Runs, *prometheus.Registry) {
	t.Helper()
	if enq == nil {
		enq = m.enq
	}
	reg := prometheus.NewRegistry()
	r, err := dagengine.NewRuns(dagengine.RunsConfig{
		Store: m.store, Enqueuer: enq, Producer: m.prod, Shards: 4, Registerer: reg, Now: m.clock.Now,
		RedriveAfter: 10 * time.Second, Logger: testLogger(t),
	})
	require.NoError(t, err)
	return r, reg
}

func (m *memSetup) put(t *testing.T, spec *sundialv1.DagSpec, jobs bool) {
	t.Helper()
	b, err := dag.Marshal(spec)
	require.NoError(t, err)
	_, err = m.store.PutDag(t.Context(), store.Dag{ID: spec.GetId(), Spec: b, Revision: 1, UpdatedAt: m.clock.Now()})
	require.NoError(t, err)
	if !jobs {
		return
	}
	for _, n := range spec.GetNodes() {
		js := &sundialv1.JobSpec{Id: n.GetJobId(), OwnerTeam: spec.GetOwnerTeam(), Priority: sundialv1.Priority_PRIORITY_HIGH,
			Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "noop"}}}}
		jb, err := proto.Marshal(js)
		require.NoError(t, err)
		_, err = m.store.UpsertJob(t.Context(), store.Job{ID: js.GetId(), Spec: jb, Revision: 3, UpdatedAt: m.clock.Now()})
		require.NoError(t, err)
	}
}

func succeeded(st dagrun.State, id string, nodes ...int) []dagrun.Input {
	var out []dagrun.Input
	for _, i := range nodes {
		n := st.Nodes[i]
		out = append(out, dagrun.RunEvent{RunID: n.RunID(id), Node: n.ID, Attempt: 1, State: sundialv1.RunState_RUN_STATE_SUCCEEDED})
	}
	return out
}

// TestConcurrentAppliersStartEachNodeOnce has four goroutines apply every
// event of a 50-way fan-out and fan-in to one DAG run at once, each event
// many times: conditional saves make every node start exactly once.
func TestConcurrentAppliersStartEachNodeOnce(t *testing.T) {
	t.Parallel()
	m := memStack(t)
	const width = 50
	m.put(t, fanDag("test.fan", width), true)
	r, reg := m.runs(t, nil)
	id, created, err := r.StartRun(t.Context(), "test.fan", m.clock.Now(), dagengine.OriginSchedule)
	require.NoError(t, err)
	require.True(t, created)

	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for {
				_, st, err := r.Get(t.Context(), id)
				if !assert.NoError(t, err) || !st.Active() {
					return
				}
				var running []int
				for i, n := range st.Nodes {
					if n.Phase.Active() {
						running = append(running, i)
					}
				}
				// Each worker sends the events in its own order.
				for k := range running {
					j := (k + w*17) % len(running)
					running[k], running[j] = running[j], running[k]
				}
				for _, in := range succeeded(st, id, running...) {
					_, err = r.Apply(t.Context(), id, in)
					assert.NoError(t, err)
				}
			}
		})
	}
	wg.Wait()
	_, st, err := r.Get(t.Context(), id)
	require.NoError(t, err)
	assert.Equal(t, dagrun.StatusSucceeded, st.Status)
	for _, n := range st.Nodes {
		assert.Equal(t, 1, n.Gen, "node %s", n.ID)
	}
	assert.Len(t, m.enq.runIDs(), width+2, "one run id per node")
	assert.Equal(t, float64(width+2), metricSum(reg, "sundial_dagengine_nodes_total", "running"), "each start saved once")
	assert.Equal(t, float64(1), metricSum(reg, "sundial_dagengine_dag_runs_total", "succeeded"))
	assert.Empty(t, st.Outbox, "every event published and acknowledged")
	t.Logf("version conflicts: %v", metricSum(reg, "sundial_dagengine_version_conflicts_total", ""))
}

// TestNodeRunCarriesTheJob checks the due entry and Run a node start
// produces.
func TestNodeRunCarriesTheJob(t *testing.T) {
	t.Parallel()
	m := memStack(t)
	spec := &sundialv1.DagSpec{Id: "data.d", OwnerTeam: "data", Nodes: []*sundialv1.DagNode{
		node("reg"),
		{Id: "in", Job: &sundialv1.DagNode_Inline{Inline: &sundialv1.JobSpec{
			Payload: []byte("hi"), Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "x"}}},
		}}},
	}}
	m.put(t, spec, false)
	m.put(t, &sundialv1.DagSpec{Id: "data.jobs-only", OwnerTeam: "data", Nodes: []*sundialv1.DagNode{node("reg")}}, true)
	r, _ := m.runs(t, nil)
	due := m.clock.Now().Add(-time.Minute)
	id, _, err := r.StartRun(t.Context(), "data.d", due, dagengine.OriginTrigger)
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("data.d@%d", due.UnixMilli()), id)

	e := m.enq.entries[id+"/reg"]
	assert.Equal(t, store.KindDAG, e.Kind)
	assert.Equal(t, "job.reg", e.JobID)
	assert.True(t, e.Due.Equal(m.clock.Now()), "due when the engine decided to start the node")
	assert.Equal(t, int64(3), e.Revision, "the job definition's revision")
	run := &sundialv1.Run{}
	require.NoError(t, proto.Unmarshal(e.Payload, run))
	assert.Equal(t, id+"/reg", run.GetRunId())
	assert.Equal(t, id, run.GetDagRunId())
	assert.Equal(t, "reg", run.GetDagNodeId())
	assert.Equal(t, sundialv1.RunOrigin_RUN_ORIGIN_DAG, run.GetOrigin())
	assert.Equal(t, sundialv1.Priority_PRIORITY_HIGH, run.GetPriority())
	assert.Equal(t, uint32(store.ShardOf("job.reg", 4)), run.GetShard())
	assert.Equal(t, 30*time.Second, run.GetTimeout().AsDuration(), "the default timeout")

	in := m.enq.entries[id+"/in"]
	require.NoError(t, proto.Unmarshal(in.Payload, run))
	assert.Equal(t, "data.d/in", run.GetJobId())
	assert.Equal(t, "data", run.GetOwnerTeam())
	assert.Equal(t, []byte("hi"), run.GetPayload())
	assert.Equal(t, sundialv1.Priority_PRIORITY_DEFAULT, run.GetPriority())
}

// TestMissingJobFailsTheNode: a node whose registered job does not exist
// fails at start, with events, and the policy applies.
func TestMissingJobFailsTheNode(t *testing.T) {
	t.Parallel()
	m := memStack(t)
	m.put(t, &sundialv1.DagSpec{Id: "t.d", OwnerTeam: "t", Nodes: []*sundialv1.DagNode{node("a"), node("b", "a")}}, false)
	r, _ := m.runs(t, nil)
	id, _, err := r.StartRun(t.Context(), "t.d", m.clock.Now(), dagengine.OriginTrigger)
	require.NoError(t, err)
	_, st, err := r.Get(t.Context(), id)
	require.NoError(t, err)
	assert.Equal(t, dagrun.StatusFailed, st.Status)
	assert.Equal(t, "job_not_found", st.Nodes[0].Reason)
	assert.Equal(t, dagrun.Skipped, st.Nodes[1].Phase)
	assert.Empty(t, st.Outbox)
	var got []string
	for _, e := range m.prod.events {
		got = append(got, e.GetNodeId()+":"+e.GetState().String()+":"+e.GetReason())
	}
	assert.Equal(t, []string{
		":DAG_STATE_RUNNING:", "a:DAG_STATE_RUNNING:", "a:DAG_STATE_FAILED:job_not_found",
		"b:DAG_STATE_SKIPPED:upstream_failed", ":DAG_STATE_FAILED:node_failed",
	}, got)

	_, _, err = r.StartRun(t.Context(), "nope", m.clock.Now(), dagengine.OriginTrigger)
	require.ErrorIs(t, err, dagengine.ErrNotRunnable)
}

// TestSavedWorkOfADeadProcessIsRedone: a process saves node starts and dies
// before enqueueing them. Another process leaves that work alone while its
// saver may still be at it, and redoes it after RedriveAfter.
func TestSavedWorkOfADeadProcessIsRedone(t *testing.T) {
	t.Parallel()
	m := memStack(t)
	m.put(t, fanDag("f", 3), true)
	down := &fakeEnqueuer{entries: map[string]store.DueEntry{}, calls: map[string]int{}}
	dead, _ := m.runs(t, down)
	id, _, err := dead.StartRun(t.Context(), "f", m.clock.Now(), dagengine.OriginTrigger)
	require.NoError(t, err)
	_, st, err := dead.Get(t.Context(), id)
	require.NoError(t, err)
	down.down.Store(true)
	_, err = dead.Apply(t.Context(), id, succeeded(st, id, 0)...)
	require.ErrorContains(t, err, "down", "saved, then failed to enqueue")

	other, _ := m.runs(t, nil)
	_, err = other.Apply(t.Context(), id)
	require.NoError(t, err)
	assert.Empty(t, m.enq.runIDs(), "young work of another process is left to it")

	m.clock.Advance(10 * time.Second)
	res, err := other.Apply(t.Context(), id)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{id + "/f-m1": 1, id + "/f-m2": 1, id + "/f-m3": 1}, m.enq.runIDs())
	for _, n := range res.State.Nodes[1:4] {
		assert.Equal(t, dagrun.Running, n.Phase)
	}
	assert.Empty(t, res.State.Outbox)
}

// interloper is a store whose next UpdateDagRun of a run is preceded by
// another process's change to the same run, as if that process's write
// landed between this one's read and write.
type interloper struct {
	*memory.Store
	armed  atomic.Bool
	before func()
}

func (s *interloper) UpdateDagRun(ctx context.Context, r store.DagRun) (int64, error) {
	if s.armed.CompareAndSwap(true, false) {
		s.before()
	}
	return s.Store.UpdateDagRun(ctx, r)
}

// TestLostWriteIsRecomputed: when another process saves first, the loser's
// conditional write fails, it re-reads and applies its event to the new
// state; the node the other process started is not started again.
func TestLostWriteIsRecomputed(t *testing.T) {
	t.Parallel()
	m := memStack(t)
	m.put(t, &sundialv1.DagSpec{Id: "t.d", OwnerTeam: "t", Nodes: []*sundialv1.DagNode{node("a"), node("b"), node("c", "a", "b")}}, true)
	other, otherReg := m.runs(t, nil)
	id, _, err := other.StartRun(t.Context(), "t.d", m.clock.Now(), dagengine.OriginTrigger)
	require.NoError(t, err)
	_, st, err := other.Get(t.Context(), id)
	require.NoError(t, err)

	ip := &interloper{Store: m.store}
	ip.before = func() {
		// The other process applies a's success while this one applies b's.
		_, err := other.Apply(t.Context(), id, succeeded(st, id, 0)...)
		require.NoError(t, err)
	}
	reg := prometheus.NewRegistry()
	mine, err := dagengine.NewRuns(dagengine.RunsConfig{Store: ip, Enqueuer: m.enq, Producer: m.prod, Shards: 4, Registerer: reg, Now: m.clock.Now})
	require.NoError(t, err)
	ip.armed.Store(true)
	res, err := mine.Apply(t.Context(), id, succeeded(st, id, 1)...)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Applied)
	assert.Equal(t, float64(1), metricSum(reg, "sundial_dagengine_version_conflicts_total", ""), "one lost write")
	assert.Equal(t, dagrun.Succeeded, res.State.Nodes[0].Phase, "the other's change is kept")
	assert.Equal(t, dagrun.Succeeded, res.State.Nodes[1].Phase, "this one's is applied on top")
	assert.Equal(t, dagrun.Running, res.State.Nodes[2].Phase, "c started by the write that saw both parents succeed")
	assert.Equal(t, float64(1), metricSum(reg, "sundial_dagengine_nodes_total", "running")+
		metricSum(otherReg, "sundial_dagengine_nodes_total", "running")-2, "c started once (a and b by StartRun)")
	assert.Equal(t, 1, m.enq.runIDs()[id+"/c"])
}
