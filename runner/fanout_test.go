package runner

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"google.golang.org/protobuf/types/known/durationpb"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/routing"
	"github.com/sundialhq/sundial/runner/target"
)

// startedCount is how many STARTED events runID has.
func (s *routeSetup) startedCount(runID string) int {
	n := 0
	for _, st := range s.h.events.states(runID) {
		if st == sundialv1.RunState_RUN_STATE_STARTED {
			n++
		}
	}
	return n
}

// waitBaseSucceeded waits for the SUCCEEDED event of a base run and
// returns it.
func (s *routeSetup) waitBaseSucceeded(t *testing.T, base string) *sundialv1.RunEvent {
	t.Helper()
	var got *sundialv1.RunEvent
	require.Eventually(t, func() bool {
		for _, ev := range s.h.events.all() {
			if ev.GetRunId() == base && ev.GetState() == succeeded {
				got = ev
				return true
			}
		}
		return false
	}, wait, 10*time.Millisecond, "base run %s never succeeded: %s", base, s.h.events.describe(base))
	return got
}

// TestBroadcast checks BROADCAST and SHARDED runs with three executors of
// one pool: the subtests share the runners and run in order.
func TestBroadcast(t *testing.T) {
	t.Parallel()
	s := newRouteSetup(t)

	t.Run("a broadcast fanned out again keeps its first plan", func(t *testing.T) {
		run := s.runs("plan", "record", 1, strategyOf(sundialv1.RoutingStrategy_ROUTING_STRATEGY_BROADCAST))[0]
		r := s.runners["r1"]
		first, err := r.marks.broadcastPlan(context.Background(), run, routing.Broadcast(run.GetRunId(), []string{"r2", "r1"}))
		require.NoError(t, err)
		assert.Equal(t, []string{"r1", "r2"}, first)
		again, err := s.runners["r3"].marks.broadcastPlan(context.Background(), run, routing.Broadcast(run.GetRunId(), []string{"r1", "r2", "r3"}))
		require.NoError(t, err)
		assert.Equal(t, first, again, "a member that joined since adds no child, and the count stays")
	})

	t.Run("broadcast reaches every live member once", func(t *testing.T) {
		base := s.runs("bc", "record", 1, strategyOf(sundialv1.RoutingStrategy_ROUTING_STRATEGY_BROADCAST))[0]
		s.h.produce(base)
		s.waitBaseSucceeded(t, base.GetRunId())
		var children []*sundialv1.Run
		for _, id := range []string{"r1", "r2", "r3"} {
			children = append(children, &sundialv1.Run{RunId: routing.BroadcastID(base.GetRunId(), id)})
		}
		assert.Equal(t, map[string]int{"r1": 1, "r2": 1, "r3": 1}, s.executors(t, children))
		for _, c := range children {
			assert.Equal(t, c.GetRunId()[len(c.GetRunId())-2:], s.succeededBy(c.GetRunId()), "child %s runs on its member", c.GetRunId())
		}
		per := map[string]int{}
		for _, c := range s.calls.of(base.GetRunId()) {
			per[c.runner]++
			assert.Equal(t, routing.BroadcastID(base.GetRunId(), c.runner), c.runID)
			assert.Equal(t, uint32(3), c.count)
		}
		assert.Equal(t, map[string]int{"r1": 1, "r2": 1, "r3": 1}, per, "handler calls per member")
	})

	t.Run("sharded gives every shard once and the base run speaks for the DAG node", func(t *testing.T) {
		const n = 7
		base := s.runs("sh", "record", 1, &sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_SHARDED, Shards: n})[0]
		base.DagRunId, base.DagNodeId = "dag@1", "node"
		s.h.produce(base)
		ev := s.waitBaseSucceeded(t, base.GetRunId())
		assert.Equal(t, "dag@1", ev.GetDagRunId())
		assert.Equal(t, "node", ev.GetDagNodeId())
		children := make([]*sundialv1.Run, n)
		for i := range children {
			children[i] = &sundialv1.Run{RunId: routing.ShardID(base.GetRunId(), i)}
		}
		got := s.executors(t, children)
		t.Logf("shards per runner: %v", got)
		for _, id := range []string{"r1", "r2", "r3"} {
			assert.InDelta(t, n/3, got[id], 1, "runner %s: %v", id, got)
		}
		shards := map[uint32]int{}
		for _, c := range s.calls.of(base.GetRunId()) {
			shards[c.shard]++
			assert.Equal(t, routing.ShardID(base.GetRunId(), int(c.shard)), c.runID)
			assert.Equal(t, uint32(n), c.count)
		}
		want := map[uint32]int{}
		for i := range n {
			want[uint32(i)] = 1
		}
		assert.Equal(t, want, shards, "handler calls per shard")
		for _, ev := range s.h.events.all() {
			if ev.GetRunId() != base.GetRunId() && ev.GetDagNodeId() != "" {
				t.Errorf("child event %s %s carries the DAG node", ev.GetRunId(), ev.GetState())
			}
		}
	})

	t.Run("a dead shard makes the base run dead", func(t *testing.T) {
		base := s.runs("shd", "fail-shard-1", 1, &sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_SHARDED, Shards: 3})[0]
		s.h.produce(base)
		var dead *sundialv1.RunEvent
		require.Eventually(t, func() bool {
			for _, ev := range s.h.events.all() {
				if ev.GetRunId() == base.GetRunId() && ev.GetState() == sundialv1.RunState_RUN_STATE_DEAD {
					dead = ev
					return true
				}
			}
			return false
		}, wait, 10*time.Millisecond, "base run %s: %s", base.GetRunId(), s.h.events.describe(base.GetRunId()))
		assert.Equal(t, "child_dead", dead.GetReason())
		assert.Equal(t, target.CodeHandler, dead.GetError().GetCode())
		assert.Empty(t, s.succeededBy(base.GetRunId()), "the base run does not succeed without shard 1")
		// The base run dies with its first dead shard; the other shards are
		// not stopped and end on their own, possibly after it.
		shard0 := routing.ShardID(base.GetRunId(), 0)
		require.Eventually(t, func() bool { return len(s.succeededBy(shard0)) > 0 },
			wait, 10*time.Millisecond, "shard 0 never succeeded: %s", s.h.events.describe(shard0))
	})

	t.Run("a shard that failed is retried as a child and the base run succeeds", func(t *testing.T) {
		base := s.runs("shr", "flaky-shard-1", 1, &sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_SHARDED, Shards: 3})[0]
		s.h.produce(base)
		ev := s.waitBaseSucceeded(t, base.GetRunId())
		assert.Equal(t, uint32(1), ev.GetAttempt(), "a base run's events are of attempt 1")
		// The shards' events are on other partitions than the base run's
		// SUCCEEDED and may be read after it: wait for them, then count.
		for i, want := range []int{1, 2, 1} {
			shard := routing.ShardID(base.GetRunId(), i)
			require.Eventually(t, func() bool { return s.startedCount(shard) >= want },
				wait, 10*time.Millisecond, "%s", s.h.events.describe(shard))
			assert.Equal(t, want, s.startedCount(shard), "%s", s.h.events.describe(shard))
		}
	})

	t.Run("sharded under overlap QUEUE with limit 1 runs every shard once", func(t *testing.T) {
		const n = 4
		base := s.runs("shq", "record", 1, &sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_SHARDED, Shards: n})[0]
		base.ConcurrencyLimit = 1
		base.OverlapPolicy = sundialv1.OverlapPolicy_OVERLAP_POLICY_QUEUE
		base.QueueDelay = durationpb.New(50 * time.Millisecond)
		s.h.produce(base)
		s.waitBaseSucceeded(t, base.GetRunId())
		for i := range n {
			assert.Equal(t, 1, s.startedCount(routing.ShardID(base.GetRunId(), i)), "shard %d", i)
		}
		assert.Len(t, s.calls.of(base.GetRunId()), n)
	})

	t.Run("a shard whose executor crashed is redone, the others are not", func(t *testing.T) {
		const n = 3
		base := s.runs("crash", "hold", 1, &sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_SHARDED, Shards: n})[0]
		s.h.produce(base)
		startedOn := map[string]string{} // shard run id -> runner
		for range n {
			id := <-s.hold.started
			require.Eventually(t, func() bool {
				for _, ev := range s.h.events.all() {
					if ev.GetRunId() == id && ev.GetState() == sundialv1.RunState_RUN_STATE_STARTED {
						startedOn[id] = ev.GetRunnerId()
						return true
					}
				}
				return false
			}, wait, 10*time.Millisecond, "no STARTED event of %s", id)
		}
		require.Len(t, startedOn, n, "%v", startedOn)
		victimShard := routing.ShardID(base.GetRunId(), 0)
		victim := startedOn[victimShard]
		require.NotEmpty(t, victim, "%v", startedOn)
		t.Logf("shards started on %v; crashing %s", startedOn, victim)

		// The other shards finish first, then the victim's executor dies
		// mid-shard: its execution cut short, no event, no lease released.
		for id := range startedOn {
			if id != victimShard {
				s.hold.release(id)
			}
		}
		for id := range startedOn {
			if id != victimShard {
				require.Eventually(t, func() bool { return s.succeededBy(id) != "" }, wait, 10*time.Millisecond, "%s: %s", id, s.h.events.describe(id))
			}
		}
		s.runners[victim].kill()
		s.runners[victim].Stop()
		var rest []string
		for _, id := range []string{"r1", "r2", "r3"} {
			if id != victim {
				rest = append(rest, id)
			}
		}
		s.waitLive(t, rest...)

		// Another member adopts the victim's directed topic and executes
		// the shard again, once its lease has expired.
		select {
		case id := <-s.hold.started:
			require.Equal(t, victimShard, id)
		case <-time.After(wait):
			t.Fatalf("shard %s never started again: %s", victimShard, s.h.events.describe(victimShard))
		}
		s.hold.release(victimShard)
		s.waitBaseSucceeded(t, base.GetRunId())
		by := s.succeededBy(victimShard)
		assert.Contains(t, rest, by, "the shard is redone by a live member")
		assert.Equal(t, 2, s.startedCount(victimShard), "%s", s.h.events.describe(victimShard))
		for id := range startedOn {
			if id != victimShard {
				assert.Equal(t, 1, s.startedCount(id), "shard %s is not redone: %s", id, s.h.events.describe(id))
			}
		}
		assert.Len(t, s.hold.started, 0, "no other shard started again")

		// Every run in the victim's directed topic adopted, the topic is
		// deleted (DirectForgetAfter after its last heartbeat) and no
		// runner consumes it any more.
		victimTopic := s.h.b.names.Direct(victim)
		adm := kadm.NewClient(s.h.client)
		require.Eventually(t, func() bool {
			ends, err := adm.ListEndOffsets(context.Background(), victimTopic)
			return err == nil && errors.Is(ends.Error(), kerr.UnknownTopicOrPartition)
		}, wait, 100*time.Millisecond, "the directed topic %s of the crashed %s is never deleted", victimTopic, victim)
		for _, id := range rest {
			require.Eventually(t, func() bool {
				return !slices.Contains(s.runners[id].consumer.GetConsumeTopics(), victimTopic)
			}, wait, 100*time.Millisecond, "runner %s still consumes %s", id, victimTopic)
		}
	})
}
