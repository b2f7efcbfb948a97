package runner

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/discovery"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/routing"
)

// TestShardedRunProcessKilled splits a run into six shards over three
// runner processes of one pool, whose HTTP calls all wait at the
// downstream, kills with SIGKILL a process with a shard call in flight,
// then lets the calls finish. The shards the killed process held are
// executed again by the others (its directed topic adopted, its leases
// expired) and answered as replays; every other shard is executed once;
// every shard has one effect, and the base run succeeds.
func TestShardedRunProcessKilled(t *testing.T) {
	t.Parallel()
	const partitions = 2
	const shards = 6
	b := realBackends(t, partitions)
	dueTopic := ensureDueTopic(t, b)
	const leaseTTL = 5 * time.Second
	h := newHarness(t, b, leaseTTL)
	gate := make(chan struct{})
	h.down.gate = gate
	relayDueEntries(t, b.brokers, dueTopic, h.enq)

	dir, err := discovery.NewDirectory(discovery.DirectoryConfig{
		Kafka: []kgo.Opt{kgo.SeedBrokers(b.brokers...)}, Topics: b.names, Tick: 50 * time.Millisecond,
	})
	require.NoError(t, err)
	require.NoError(t, dir.Start(context.Background()))
	t.Cleanup(dir.Stop)

	procs := map[string]*runnerProc{}
	for i := range 3 {
		id := "proc-" + strconv.Itoa(i)
		procs[id] = startRunnerProcess(t, runnerProcessConfig{
			ID: id, Brokers: b.brokers, TopicPrefix: b.names.Prefix, DueTopic: dueTopic,
			RedisAddr: b.redisAddr, KeyPrefix: b.prefix, Group: h.group,
			LeaseTTL: leaseTTL, SessionTimeout: DefaultSessionTimeout, Concurrency: 8,
			Pool: "p", AnnounceInterval: 200 * time.Millisecond,
		})
	}
	liveIDs := func() []string {
		var ids []string
		for _, m := range dir.Live("p") {
			ids = append(ids, m.ID)
		}
		slices.Sort(ids)
		return ids
	}
	require.Eventually(t, func() bool { return len(liveIDs()) == 3 }, 3*time.Minute, 50*time.Millisecond, "live: %v", liveIDs())
	waitGroupStable(t, h.client, h.group, len(procs), 3*partitions)

	base := h.run("shk", time.Now(), func(run *sundialv1.Run) {
		run.Pool = "p"
		run.Routing = &sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_SHARDED, Shards: shards}
		run.Timeout = nil // the harness's target timeout is too short for calls held at the gate
	})
	run := func(i int) string { return routing.ShardID(base.GetRunId(), i) }
	h.produce(base)

	// Every shard's call arrives and waits at the gate.
	require.Eventually(t, func() bool {
		for i := range shards {
			if h.down.requestsOf(run(i)) == 0 {
				return false
			}
		}
		return true
	}, 3*time.Minute, 20*time.Millisecond, "shard calls: %s", h.down.figures())
	startedOn := map[string]string{} // shard run id -> the process that started it
	require.Eventually(t, func() bool {
		for _, ev := range h.events.all() {
			if ev.GetState() == started && slices.Contains(shardIDs(base.GetRunId(), shards), ev.GetRunId()) {
				startedOn[ev.GetRunId()] = ev.GetRunnerId()
			}
		}
		return len(startedOn) == shards
	}, 3*time.Minute, 20*time.Millisecond, "STARTED events of the shards: %v", startedOn)
	victim := procs[startedOn[run(0)]]
	require.NotNil(t, victim, "shard 0 started on %q", startedOn[run(0)])
	held := map[string]bool{} // shards whose call the victim had in flight
	for id, by := range startedOn {
		if by == victim.id {
			held[id] = true
		}
	}
	t.Logf("killing %s, with %d calls in flight (shards %v)", victim.id, h.down.inFlightOf(victim.id), held)
	victim.kill()
	close(gate)

	succeededBy := func(id string) string {
		for _, ev := range h.events.all() {
			if ev.GetRunId() == id && ev.GetState() == succeeded {
				return ev.GetRunnerId()
			}
		}
		return ""
	}
	// The bound only turns a hang into a failure: recovery waits for the
	// group's session timeout and the victim's leases.
	require.Eventually(t, func() bool { return succeededBy(base.GetRunId()) != "" }, 5*time.Minute, 50*time.Millisecond,
		"base run: %s; downstream: %s", h.events.describe(base.GetRunId()), h.down.figures())

	require.NotEmpty(t, held, "the victim held no shard")
	for i := range shards {
		id := run(i)
		starts := 0
		for _, st := range h.events.states(id) {
			if st == started {
				starts++
			}
		}
		by := succeededBy(id)
		assert.NotEmpty(t, by, "shard %s: %s", id, h.events.describe(id))
		assert.NotEqual(t, victim.id, by, "shard %s", id)
		if held[id] {
			assert.Equal(t, 2, starts, "shard %s was redone once: %s", id, h.events.describe(id))
		} else {
			assert.Equal(t, 1, starts, "shard %s was not redone: %s", id, h.events.describe(id))
			assert.Equal(t, 1, h.down.requestsOf(id), "shard %s called once", id)
		}
	}
	f := h.down.figures()
	assert.Equal(t, shards, f.effects, "%s", f)
	assert.Zero(t, f.dupEffects, "%s", f)
}

func shardIDs(base string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = routing.ShardID(base, i)
	}
	return out
}
