package runner

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sundialhq/sundial/discovery"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/quota"
	"github.com/sundialhq/sundial/routing"
	"github.com/sundialhq/sundial/runner/target"
)

// TestTeamRunRateQuotaBoundsFanOut: one SHARDED run of 64 shards, for a team
// with max_runs_per_minute 32, on two runners of one pool. In the minute it
// fans out, exactly 32 children start; the other 32 are deferred (DEFERRED,
// reason team_rate, no attempt spent) to the next minute, where they run:
// none is lost and none runs twice. Before, all 64 started at once: a
// team's fan-out had no bound but its shard count.
func TestTeamRunRateQuotaBoundsFanOut(t *testing.T) {
	t.Parallel()
	const (
		shards = 64
		limit  = 32
		team   = "fanout-team"
	)
	b := realBackends(t, 4)
	h := newHarness(t, b, steadyTTL)
	dir, err := discovery.NewDirectory(discovery.DirectoryConfig{
		Kafka: []kgo.Opt{kgo.SeedBrokers(b.brokers...)}, Topics: b.names, Tick: 50 * time.Millisecond,
	})
	require.NoError(t, err)
	require.NoError(t, dir.Start(context.Background()))
	t.Cleanup(dir.Stop)
	quotas := quota.NewMemory()
	require.NoError(t, quotas.SetQuota(t.Context(), quota.Quota{Team: team, MaxRunsPerMinute: limit}))
	var (
		mu      sync.Mutex
		started = map[string]int{} // child run id -> handler calls
	)
	count := recordHandler(func(run *sundialv1.Run) {
		mu.Lock()
		started[run.GetRunId()]++
		mu.Unlock()
	})
	runners := map[string]*Runner{}
	for _, id := range []string{"r1", "r2"} {
		runners[id] = h.start(func(c *Config) {
			c.ID = id
			c.Pool = "p"
			c.Concurrency = 16
			c.AnnounceInterval = 200 * time.Millisecond
			c.Directory = dir
			c.RouteDelay = 100 * time.Millisecond
			c.Handlers = map[string]target.Handler{"count": count}
			c.TeamQuotas = quota.NewCache(quotas, time.Hour, nil)
			c.TeamQuotaDelay = 200 * time.Millisecond
		})
	}
	require.Eventually(t, func() bool { return len(dir.Live("p")) == 2 }, wait, 20*time.Millisecond, "runners not live")
	for id, r := range runners {
		require.Eventually(t, func() bool {
			r.in.mu.Lock()
			defer r.in.mu.Unlock()
			return r.in.parts[tp{b.names.Direct(id), 0}] != nil
		}, wait, 10*time.Millisecond, "runner %s never got its directed topic", id)
	}

	// The fan-out and the first minute's 32 runs take seconds; start
	// them early in a minute (of this host's clock, which the local
	// Redis shares), so that the minute's count is read inside it.
	if now := time.Now(); now.Second() > 30 {
		time.Sleep(now.Truncate(time.Minute).Add(time.Minute + 500*time.Millisecond).Sub(now))
	}
	minuteEnd := time.Now().Truncate(time.Minute).Add(time.Minute)

	base := h.run("fanout-team.wide", time.Now(), func(r *sundialv1.Run) {
		r.OwnerTeam = team
		r.Target = &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "count"}}}
		r.Timeout = durationpb.New(time.Minute)
		r.Pool = "p"
		r.Routing = &sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_SHARDED, Shards: shards}
	})
	h.produce(base)
	children := make([]string, shards)
	for i := range children {
		children[i] = routing.ShardID(base.GetRunId(), i)
	}
	deferredForRate := func() int {
		n := 0
		seen := map[string]bool{}
		for _, ev := range h.events.all() {
			if ev.GetState() == deferred && ev.GetReason() == "team_rate" && !seen[ev.GetRunId()] {
				seen[ev.GetRunId()] = true
				n++
			}
		}
		return n
	}
	startedNow := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(started)
	}
	require.Eventually(t, func() bool { return startedNow()+deferredForRate() >= shards }, time.Until(minuteEnd)-time.Second, 20*time.Millisecond,
		"in the first minute: %d children started, %d deferred for the team's rate", startedNow(), deferredForRate())
	require.True(t, time.Now().Before(minuteEnd), "the first minute ended before its count was read")
	assert.Equal(t, limit, startedNow(), "children started in the minute of the fan-out (max_runs_per_minute %d)", limit)
	assert.Equal(t, shards-limit, deferredForRate(), "children deferred to the next minute")

	// The next minute runs the rest: every child succeeds, once.
	require.Eventually(t, func() bool {
		for _, id := range children {
			s := h.events.states(id)
			if len(s) == 0 || s[len(s)-1] != succeeded {
				return false
			}
		}
		return true
	}, time.Until(minuteEnd)+time.Minute, 50*time.Millisecond, "not every child succeeded after the next minute: %d started", startedNow())
	mu.Lock()
	defer mu.Unlock()
	for _, id := range children {
		assert.Equal(t, 1, started[id], "handler calls of %s", id)
	}
	for _, ev := range h.events.all() {
		if ev.GetState() == deferred {
			assert.EqualValues(t, 1, ev.GetAttempt(), "a deferral spends no attempt")
		}
	}
}
