package runner

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sundialhq/sundial/discovery"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/target"
)

// routeSetup is three runners r1, r2, r3 of pool "p" on the real stack,
// sharing one Directory, each with one slot, the hold handler and a quick
// one.
type routeSetup struct {
	h       *harness
	dir     *discovery.Directory
	hold    *holder
	calls   *callLog
	runners map[string]*Runner
}

// callLog records the calls of the "record" handler: on which runner each
// run executed, with the shard it was given.
type callLog struct {
	mu    sync.Mutex
	calls []call
}

type call struct {
	runner, runID, baseID string
	shard, count          uint32
}

func (l *callLog) handler(runner string) target.Handler {
	return recordHandler(func(run *sundialv1.Run) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.calls = append(l.calls, call{runner, run.GetRunId(), run.GetBaseRunId(), run.GetShardIndex(), run.GetShardCount()})
	})
}

// of returns the calls of the children of baseID.
func (l *callLog) of(baseID string) []call {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []call
	for _, c := range l.calls {
		if c.baseID == baseID {
			out = append(out, c)
		}
	}
	return out
}

// failShard1 fails shard 1 of a run for good and lets the others succeed.
type failShard1 struct{}

func (failShard1) Handle(_ context.Context, run *sundialv1.Run) error {
	if run.GetShardIndex() == 1 {
		return target.Permanent(errors.New("shard 1 cannot be done"))
	}
	return nil
}

// flakyShard1 fails the first attempt of shard 1 of a run, retryably.
type flakyShard1 struct{}

func (flakyShard1) Handle(_ context.Context, run *sundialv1.Run) error {
	if run.GetShardIndex() == 1 && run.GetAttempt() == 1 {
		return errors.New("shard 1 is not ready yet")
	}
	return nil
}

type recordHandler func(*sundialv1.Run)

func (h recordHandler) Handle(_ context.Context, run *sundialv1.Run) error {
	h(run)
	return nil
}

func newRouteSetup(t *testing.T) *routeSetup {
	t.Helper()
	b := realBackends(t, 4)
	h := newHarness(t, b, steadyTTL)
	dir, err := discovery.NewDirectory(discovery.DirectoryConfig{
		Kafka: []kgo.Opt{kgo.SeedBrokers(b.brokers...)}, Topics: b.names, Tick: 50 * time.Millisecond,
	})
	require.NoError(t, err)
	require.NoError(t, dir.Start(context.Background()))
	t.Cleanup(dir.Stop)
	s := &routeSetup{h: h, dir: dir, hold: newHolder(), calls: &callLog{}, runners: map[string]*Runner{}}
	for _, id := range []string{"r1", "r2", "r3"} {
		s.runners[id] = h.start(func(c *Config) {
			c.ID = id
			c.Pool = "p"
			c.PoolSlots = 1
			c.Concurrency = 2
			c.AnnounceInterval = 200 * time.Millisecond
			c.Directory = dir
			c.RouteDelay = 100 * time.Millisecond
			c.DirectForgetAfter = 3 * time.Second
			c.Handlers = map[string]target.Handler{"hold": s.hold, "quick": quick{}, "record": s.calls.handler(id), "fail-shard-1": failShard1{}, "flaky-shard-1": flakyShard1{}}
		})
	}
	s.waitLive(t, "r1", "r2", "r3")
	// Every runner holds its directed partition: the group has settled
	// with all three, so no rebalance moves a partition (and its routing
	// turn) while a test routes.
	for id, r := range s.runners {
		require.Eventually(t, func() bool {
			r.in.mu.Lock()
			defer r.in.mu.Unlock()
			return r.in.parts[tp{b.names.Direct(id), 0}] != nil
		}, wait, 10*time.Millisecond, "runner %s never got its directed topic: %s", id, r.in.debugState())
	}
	return s
}

// isDirect reports whether topic is a runner's directed topic, which tests
// counting the runs topics' partitions leave out.
func isDirect(topic string) bool { return strings.Contains(topic, "sundial.runs.direct.") }

type quick struct{}

func (quick) Handle(context.Context, *sundialv1.Run) error { return nil }

// waitLive waits until the live members of pool "p" are exactly ids.
func (s *routeSetup) waitLive(t *testing.T, ids ...string) {
	t.Helper()
	var got []string
	require.Eventually(t, func() bool {
		got = got[:0]
		for _, m := range s.dir.Live("p") {
			got = append(got, m.ID)
		}
		return assert.ObjectsAreEqual(ids, got)
	}, wait, 20*time.Millisecond, "want live %v", ids)
}

// runs returns n runs of job, routed by r, on handler.
func (s *routeSetup) runs(job, handler string, n int, r *sundialv1.Routing) []*sundialv1.Run {
	now := time.Now()
	out := make([]*sundialv1.Run, n)
	for i := range out {
		out[i] = s.h.run(job, now.Add(time.Duration(i)*time.Millisecond), func(run *sundialv1.Run) {
			run.Target = &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: handler}}}
			run.Timeout = durationpb.New(time.Minute)
			run.Pool = "p"
			run.Routing = r
		})
	}
	return out
}

// executors waits for every run to succeed once and returns how many ran
// on each runner, by the runner id of their SUCCEEDED events.
func (s *routeSetup) executors(t *testing.T, runs []*sundialv1.Run) map[string]int {
	t.Helper()
	got := map[string]int{}
	for _, run := range runs {
		require.Eventually(t, func() bool { return s.succeededBy(run.GetRunId()) != "" },
			wait, 10*time.Millisecond, "run %s: events %s", run.GetRunId(), s.h.events.describe(run.GetRunId()))
		got[s.succeededBy(run.GetRunId())]++
		n := 0
		for _, st := range s.h.events.states(run.GetRunId()) {
			if st == sundialv1.RunState_RUN_STATE_STARTED {
				n++
			}
		}
		assert.Equal(t, 1, n, "run %s started once: %s", run.GetRunId(), s.h.events.describe(run.GetRunId()))
	}
	return got
}

func (s *routeSetup) succeededBy(runID string) string {
	for _, ev := range s.h.events.all() {
		if ev.GetRunId() == runID && ev.GetState() == succeeded {
			return ev.GetRunnerId()
		}
	}
	return ""
}

func strategyOf(st sundialv1.RoutingStrategy) *sundialv1.Routing {
	return &sundialv1.Routing{Strategy: st}
}

// TestRouting checks where routed runs went, with three executors of one
// pool: the subtests share the runners and run in order.
func TestRouting(t *testing.T) {
	t.Parallel()
	s := newRouteSetup(t)

	t.Run("round-robin spreads evenly", func(t *testing.T) {
		const n = 12
		got := s.executors(t, s.h.produceAndReturn(s.runs("rr", "quick", n, strategyOf(sundialv1.RoutingStrategy_ROUTING_STRATEGY_ROUND_ROBIN))))
		t.Logf("round-robin: %v", got)
		for _, id := range []string{"r1", "r2", "r3"} {
			assert.InDelta(t, n/3, got[id], 1, "runner %s: %v", id, got)
		}
	})

	t.Run("random stays in the pool", func(t *testing.T) {
		got := s.executors(t, s.h.produceAndReturn(s.runs("rnd", "quick", 6, strategyOf(sundialv1.RoutingStrategy_ROUTING_STRATEGY_RANDOM))))
		t.Logf("random: %v", got)
		for id := range got {
			assert.Contains(t, []string{"r1", "r2", "r3"}, id)
		}
	})

	t.Run("least-loaded avoids a busy member", func(t *testing.T) {
		busy := s.runs("busy", "hold", 1, &sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_FIXED, Executor: "r3"})[0]
		s.h.produce(busy)
		require.Equal(t, busy.GetRunId(), <-s.hold.started)
		require.Eventually(t, func() bool {
			m, ok := s.dir.Member("r3")
			return ok && m.Free() == 0
		}, wait, 20*time.Millisecond, "r3 never announced its slot busy")
		got := s.executors(t, s.h.produceAndReturn(s.runs("ll", "quick", 6, strategyOf(sundialv1.RoutingStrategy_ROUTING_STRATEGY_LEAST_LOADED))))
		t.Logf("least-loaded with r3 busy: %v", got)
		assert.Zero(t, got["r3"], "%v", got)
		s.hold.release(busy.GetRunId())
		assert.Equal(t, map[string]int{"r3": 1}, s.executors(t, []*sundialv1.Run{busy}))
	})

	t.Run("fixed lands on its member and falls back when it stops", func(t *testing.T) {
		toR2 := &sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_FIXED, Executor: "r2"}
		assert.Equal(t, map[string]int{"r2": 4}, s.executors(t, s.h.produceAndReturn(s.runs("fx", "quick", 4, toR2))))

		s.runners["r2"].Stop()
		s.waitLive(t, "r1", "r3")
		toR2Wait := &sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_FIXED, Executor: "r2", Fallback: sundialv1.RoutingFallback_ROUTING_FALLBACK_WAIT}
		waiting := s.runs("fx-wait", "quick", 1, toR2Wait)[0]
		s.h.produce(waiting)
		got := s.executors(t, s.h.produceAndReturn(s.runs("fx-any", "quick", 4, toR2)))
		t.Logf("fixed on r2 while it is gone: %v", got)
		assert.Zero(t, got["r2"], "%v", got)
		assert.Equal(t, 4, got["r1"]+got["r3"], "%v", got)

		// The run that waits for r2 is deferred while r2 is away, and runs
		// on r2 once it is back.
		require.Eventually(t, func() bool {
			for _, ev := range s.h.events.all() {
				if ev.GetRunId() == waiting.GetRunId() && ev.GetState() == sundialv1.RunState_RUN_STATE_DEFERRED {
					return ev.GetReason() == reasonWaitExecutor
				}
			}
			return false
		}, wait, 10*time.Millisecond, "run %s: events %s", waiting.GetRunId(), s.h.events.describe(waiting.GetRunId()))
		assert.Empty(t, s.succeededBy(waiting.GetRunId()), "it must not run while r2 is away")
		require.NoError(t, s.runners["r2"].Start(context.Background()))
		s.waitLive(t, "r1", "r2", "r3")
		assert.Equal(t, map[string]int{"r2": 1}, s.executors(t, []*sundialv1.Run{waiting}))
	})

	t.Run("runs routed to a member that died are routed again", func(t *testing.T) {
		// r1 dies (killed: its executions cut short, its consumer closed;
		// then stopped, so it leaves the live set) with runs already
		// routed to it waiting in its directed topic.
		s.runners["r1"].kill()
		s.runners["r1"].Stop()
		s.waitLive(t, "r2", "r3")
		runs := s.runs("orphan", "quick", 4, strategyOf(sundialv1.RoutingStrategy_ROUTING_STRATEGY_ROUND_ROBIN))
		recs := make([]*kgo.Record, len(runs))
		for i, run := range runs {
			run.RoutedTo = "r1"
			val, err := proto.Marshal(run)
			require.NoError(t, err)
			recs[i] = &kgo.Record{Topic: s.h.b.names.Direct("r1"), Key: []byte(run.GetRunId()), Value: val}
		}
		require.NoError(t, s.h.client.ProduceSync(context.Background(), recs...).FirstErr())
		got := s.executors(t, runs)
		t.Logf("runs left on r1: %v", got)
		assert.Zero(t, got["r1"], "%v", got)
		assert.Equal(t, 4, got["r2"]+got["r3"], "%v", got)
	})
}

// produceAndReturn produces runs and returns them.
func (h *harness) produceAndReturn(runs []*sundialv1.Run) []*sundialv1.Run {
	h.t.Helper()
	h.produce(runs...)
	return runs
}
