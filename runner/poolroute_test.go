package runner

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/discovery"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// TestPoolHoldsForUnroutedRuns, on the real stack: the HTTP runs of a job
// of pool "billing", without routing, produced to the shared runs topics
// that a runner of pool "default" consumes, wait (DEFERRED no_executor,
// the pool named) while no runner of pool "billing" is live, and once one
// is, every one executes on it, once; the default pool's runs fetched by
// the billing runner execute on the default one.
func TestPoolHoldsForUnroutedRuns(t *testing.T) {
	t.Parallel()
	b := realBackends(t, 4)
	h := newHarness(t, b, steadyTTL)
	dir, err := discovery.NewDirectory(discovery.DirectoryConfig{
		Kafka: []kgo.Opt{kgo.SeedBrokers(b.brokers...)}, Topics: b.names, Tick: 50 * time.Millisecond,
	})
	require.NoError(t, err)
	require.NoError(t, dir.Start(context.Background()))
	t.Cleanup(dir.Stop)
	start := func(id, pool string) {
		h.start(func(c *Config) {
			c.ID = id
			c.Pool = pool
			c.AnnounceInterval = 200 * time.Millisecond
			c.Directory = dir
			c.RouteDelay = 200 * time.Millisecond
		})
		require.Eventually(t, func() bool {
			for _, m := range dir.Live(pool) {
				if m.ID == id {
					return true
				}
			}
			return false
		}, wait, 20*time.Millisecond, "runner %s never live in pool %s", id, pool)
	}
	runs := func(team, pool string, n int) []*sundialv1.Run {
		out := make([]*sundialv1.Run, n)
		for i := range out {
			out[i] = h.run(fmt.Sprintf("%s.job-%d", team, i), time.Now(), func(r *sundialv1.Run) {
				r.OwnerTeam = team
				r.Pool = pool
			})
		}
		return out
	}
	eventOf := func(runID string, states ...sundialv1.RunState) *sundialv1.RunEvent {
		for _, ev := range h.events.all() {
			for _, st := range states {
				if ev.GetRunId() == runID && ev.GetState() == st {
					return ev
				}
			}
		}
		return nil
	}
	// executedOn waits for every run to succeed and checks it started
	// once, on runner.
	executedOn := func(runner string, runs []*sundialv1.Run) {
		t.Helper()
		for _, run := range runs {
			id := run.GetRunId()
			require.Eventually(t, func() bool { return eventOf(id, succeeded) != nil }, wait, 10*time.Millisecond,
				"run %s: events %s", id, h.events.describe(id))
			assert.Equal(t, runner, eventOf(id, succeeded).GetRunnerId(), "run %s: events %s", id, h.events.describe(id))
			n := 0
			for _, st := range h.events.states(id) {
				if st == started {
					n++
				}
			}
			assert.Equal(t, 1, n, "run %s started once: %s", id, h.events.describe(id))
		}
	}

	start("d1", "default")
	billing := runs("billing", "billing", 8)
	h.produce(billing...)
	for _, run := range billing {
		id := run.GetRunId()
		require.Eventually(t, func() bool { return eventOf(id, deferred, started) != nil }, wait, 10*time.Millisecond,
			"run %s: events %s", id, h.events.describe(id))
		ev := eventOf(id, deferred, started)
		require.Equal(t, deferred, ev.GetState(), "run %s must wait for its pool, not run on d1: %s", id, h.events.describe(id))
		assert.Equal(t, reasonNoExecutor, ev.GetReason())
		assert.Equal(t, "no live executor in pool billing", ev.GetError().GetMessage())
	}

	start("b1", "billing")
	defaults := runs("ops", "", 8)
	h.produce(defaults...)
	executedOn("b1", billing)
	executedOn("d1", defaults)
	effects, dupEffects, _ := h.down.counts()
	assert.Equal(t, len(billing)+len(defaults), effects)
	assert.Zero(t, dupEffects)
}
