package dagengine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/dagengine"
	"github.com/sundialhq/sundial/dagengine/dag"
	"github.com/sundialhq/sundial/dagengine/dagrun"
	"github.com/sundialhq/sundial/enqueue"
	"github.com/sundialhq/sundial/internal/stacktest"
	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/cassandra"
)

const testShards = 4

// stack is one test's real Kafka topics and Cassandra keyspace.
type stack struct {
	t        *testing.T
	ctx      context.Context
	names    topics.Names
	brokers  []string
	hosts    []string // Cassandra's
	keyspace string
	store    *cassandra.Store
	client   *kgo.Client // produces wake-ups (enqueue's partitioner), events and records
	enq      *enqueue.Enqueuer
}

func setup(t *testing.T) *stack {
	t.Helper()
	k := testenv.NeedKafka(t)
	c := testenv.NeedCassandra(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	t.Cleanup(cancel)
	inst := stacktest.Install(ctx, t, k, c, testShards)
	return &stack{t: t, ctx: ctx, names: inst.Names, brokers: k.Brokers, hosts: c.Hosts, keyspace: c.Keyspace, store: inst.Store, client: inst.Producer, enq: inst.Enqueuer}
}

// instance is one running engine and its metrics.
type instance struct {
	*dagengine.Engine
	reg *prometheus.Registry
}

// engine starts an engine instance; groups name its consumer groups, so
// that instances can share or not share the events.
func (s *stack) engine(group string, enq dagengine.Enqueuer) *instance {
	s.t.Helper()
	if enq == nil {
		enq = s.enq
	}
	reg := prometheus.NewRegistry()
	e, err := dagengine.New(dagengine.Config{
		Kafka: []kgo.Opt{kgo.SeedBrokers(s.brokers...)}, Topics: s.names,
		Group: group, DefinitionsGroup: group + "-definitions", SharedTopic: true, // the tests produce to sundial.jobs
		Store: s.store, Enqueuer: enq, Producer: s.client, Shards: testShards,
		SweepInterval: time.Second, RedriveAfter: 2 * time.Second, RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond,
		Registerer: reg, Logger: testLogger(s.t),
	})
	require.NoError(s.t, err)
	require.NoError(s.t, e.Start(s.ctx))
	s.t.Cleanup(e.Stop)
	return &instance{Engine: e, reg: reg}
}

// nodesStarted is the instance's count of node starts it saved.
func (in *instance) nodesStarted() int {
	return int(metricSum(in.reg, "sundial_dagengine_nodes_total", "running"))
}

// metricSum adds up the samples of a metric whose labels include value
// (every sample when value is empty).
func metricSum(reg *prometheus.Registry, name, value string) float64 {
	mfs, _ := reg.Gather()
	var v float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := value == ""
			for _, l := range m.GetLabel() {
				match = match || l.GetValue() == value
			}
			if match {
				v += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return v
}

// putDag stores a definition directly, as the definitions consumer would.
func (s *stack) putDag(spec *sundialv1.DagSpec) {
	s.t.Helper()
	_, errs := dag.Compile(spec, dag.Options{})
	require.Empty(s.t, errs)
	b, err := dag.Marshal(spec)
	require.NoError(s.t, err)
	_, err = s.store.PutDag(s.ctx, store.Dag{ID: spec.GetId(), Spec: b, Revision: 1, UpdatedAt: time.Now()})
	require.NoError(s.t, err)
}

// putJob registers a job the nodes can run.
func (s *stack) putJob(id string) {
	s.t.Helper()
	spec := &sundialv1.JobSpec{Id: id, OwnerTeam: "test", Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "noop"}}}}
	b, err := proto.Marshal(spec)
	require.NoError(s.t, err)
	_, err = s.store.UpsertJob(s.ctx, store.Job{ID: id, Spec: b, Revision: 7, UpdatedAt: time.Now()})
	require.NoError(s.t, err)
}

// state reads a DAG run's state.
func (s *stack) state(id string) (store.DagRun, dagrun.State) {
	s.t.Helper()
	row, err := s.store.GetDagRun(s.ctx, id)
	require.NoError(s.t, err)
	st, err := dagrun.Unmarshal(row.State)
	require.NoError(s.t, err)
	return row, st
}

// waitStatus waits until a DAG run's stored status is want.
func (s *stack) waitStatus(id, want string, within time.Duration) dagrun.State {
	s.t.Helper()
	var last string
	ok := eventually(s.ctx, within, func() bool {
		row, err := s.store.GetDagRun(s.ctx, id)
		if err != nil {
			return false
		}
		last = row.Status + " (" + row.Summary + ")"
		return row.Status == want
	})
	require.True(s.t, ok, "dag run %s: status %s, want %s", id, last, want)
	_, st := s.state(id)
	return st
}

// eventually polls cond until it holds or within passes. It waits on the
// store, which has no change notification.
func eventually(ctx context.Context, within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// simRunner stands in for the dispatcher and the runners: it reads the
// wake-ups on sundial.shards, takes the Run each KindDAG entry carries, and
// publishes the run's events on sundial.events as a runner would. Runs of
// nodes in fail end DEAD; runs of nodes in hold get STARTED only, until
// released.
type simRunner struct {
	t      *testing.T
	s      *stack
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu         sync.Mutex
	fail       map[string]bool
	hold       map[string]bool
	held       map[string]*sundialv1.Run
	deliveries map[string]int // run id -> wake-ups seen
	changed    chan struct{}
	published  atomic.Int64
}

func (s *stack) runner(fail, hold []string) *simRunner {
	s.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.brokers...), kgo.ConsumeTopics(s.names.Shards()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(s.t, err)
	ctx, cancel := context.WithCancel(s.ctx)
	r := &simRunner{
		t: s.t, s: s, cl: cl, cancel: cancel, done: make(chan struct{}),
		fail: set(fail), hold: set(hold), held: map[string]*sundialv1.Run{}, deliveries: map[string]int{},
		changed: make(chan struct{}, 1),
	}
	go r.loop(ctx)
	s.t.Cleanup(func() {
		cancel()
		<-r.done
		cl.Close()
	})
	return r
}

func set(xs []string) map[string]bool {
	m := map[string]bool{}
	for _, x := range xs {
		m[x] = true
	}
	return m
}

func (r *simRunner) loop(ctx context.Context) {
	defer close(r.done)
	for {
		fetches := r.cl.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return
		}
		fetches.EachRecord(func(rec *kgo.Record) {
			e, err := enqueue.Decode(rec.Value)
			if err != nil || e.Kind != store.KindDAG {
				return
			}
			run := &sundialv1.Run{}
			if err := proto.Unmarshal(e.Payload, run); err != nil {
				r.t.Errorf("wake-up of %s carries no Run: %v", e.RunID, err)
				return
			}
			r.mu.Lock()
			r.deliveries[run.GetRunId()]++
			first := r.deliveries[run.GetRunId()] == 1
			hold := r.hold[run.GetDagNodeId()]
			if first && hold {
				r.held[run.GetDagNodeId()] = run
			}
			// A node fails when the test says so, or when it runs the
			// handler "broken" (a definition to fix and resume).
			fail := r.fail[run.GetDagNodeId()] || run.GetTarget().GetHandler().GetName() == "broken"
			r.mu.Unlock()
			if !first {
				return // the runner's dedupe mark refuses a second delivery
			}
			r.publish(ctx, run, sundialv1.RunState_RUN_STATE_STARTED)
			if !hold {
				r.finish(ctx, run, fail)
			}
		})
		select {
		case r.changed <- struct{}{}:
		default:
		}
	}
}

func (r *simRunner) finish(ctx context.Context, run *sundialv1.Run, fail bool) {
	if fail {
		r.publish(ctx, run, sundialv1.RunState_RUN_STATE_FAILED)
		r.publish(ctx, run, sundialv1.RunState_RUN_STATE_DEAD)
		return
	}
	r.publish(ctx, run, sundialv1.RunState_RUN_STATE_SUCCEEDED)
}

// release lets a held node's run end, and stops holding the node.
func (r *simRunner) release(t *testing.T, node string, fail bool) {
	t.Helper()
	r.mu.Lock()
	run := r.held[node]
	delete(r.held, node)
	delete(r.hold, node)
	r.mu.Unlock()
	require.NotNil(t, run, "node %s has no held run", node)
	r.finish(r.s.ctx, run, fail)
}

// setFail changes whether a node's next runs fail.
func (r *simRunner) setFail(node string, fail bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail[node] = fail
}

// waitHeld waits until a run of node is held.
func (r *simRunner) waitHeld(t *testing.T, node string) {
	t.Helper()
	ok := eventually(r.s.ctx, time.Minute, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.held[node] != nil
	})
	require.True(t, ok, "no run of node %s arrived", node)
}

// runIDs returns the distinct run ids of a DAG run delivered, with their
// number of deliveries.
func (r *simRunner) runIDs(dagRunID string) map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for k, v := range r.deliveries {
		if strings.HasPrefix(k, dagRunID+"/") {
			out[k] = v
		}
	}
	return out
}

func (r *simRunner) publish(ctx context.Context, run *sundialv1.Run, state sundialv1.RunState) {
	ev := &sundialv1.RunEvent{
		RunId: run.GetRunId(), JobId: run.GetJobId(), Attempt: 1, State: state, Time: timestamppb.Now(),
		DueTime: run.GetDueTime(), DagRunId: run.GetDagRunId(), DagNodeId: run.GetDagNodeId(), RunnerId: "sim",
	}
	// Every other event is written as a runner from before the DAG run
	// header would (sundialv1.HeaderDagRun), the others as today's runners
	// do: during an upgrade both share the topic, and every scenario runs
	// on that mix.
	var (
		b       []byte
		headers []kgo.RecordHeader
		err     error
	)
	if r.published.Add(1)%2 == 0 {
		b, headers, err = topics.EncodeEvent(sundialv1.EncodingProtobuf, ev)
	} else {
		b, err = proto.Marshal(ev)
		headers = []kgo.RecordHeader{{Key: sundialv1.HeaderKind, Value: []byte(sundialv1.KindRunEvent)}}
	}
	if err != nil {
		r.t.Errorf("encode event: %v", err)
		return
	}
	rec := &kgo.Record{Topic: r.s.names.Events(), Key: []byte(run.GetJobId()), Value: b, Headers: headers}
	if err := r.s.client.ProduceSync(ctx, rec).FirstErr(); err != nil && !errors.Is(err, context.Canceled) {
		r.t.Errorf("publish %s of %s: %v", state, run.GetRunId(), err)
	}
}

// dagEvents reads every DagRunEvent published so far on sundial.events.
func (s *stack) dagEvents(dagRunID string) []*sundialv1.DagRunEvent {
	s.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.brokers...), kgo.ConsumeTopics(s.names.Events()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(s.t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(s.ctx, s.names.Events())
	require.NoError(s.t, err)
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	var out []*sundialv1.DagRunEvent
	for len(want) > 0 {
		fetches := cl.PollFetches(s.ctx)
		require.NoError(s.t, s.ctx.Err())
		fetches.EachRecord(func(rec *kgo.Record) {
			if rec.Offset+1 >= want[rec.Partition] {
				delete(want, rec.Partition)
			}
			for _, h := range rec.Headers {
				if h.Key == sundialv1.HeaderKind && string(h.Value) == sundialv1.KindDagRunEvent {
					ev := &sundialv1.DagRunEvent{}
					require.NoError(s.t, proto.Unmarshal(rec.Value, ev))
					if ev.GetDagRunId() == dagRunID {
						out = append(out, ev)
					}
				}
			}
		})
	}
	return out
}

// eventNames renders events as "node:state" ("dag" for the DAG run).
func eventNames(evs []*sundialv1.DagRunEvent) []string {
	var out []string
	for _, e := range evs {
		node := e.GetNodeId()
		if node == "" {
			node = "dag"
		}
		out = append(out, node+":"+strings.ToLower(strings.TrimPrefix(e.GetState().String(), "DAG_STATE_")))
	}
	return out
}
