package runner

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sundialhq/sundial/discovery"
	"github.com/sundialhq/sundial/leasing"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/target"
)

// poolRun is a run of its own job (no overlap limit) on the hold handler.
func poolRun(h *harness, job string, due time.Time, prio sundialv1.Priority) *sundialv1.Run {
	return h.run(job, due, func(r *sundialv1.Run) {
		r.Target = &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "hold"}}}
		r.Priority = prio
		r.Timeout = durationpb.New(time.Minute)
	})
}

// startPoolRunner starts a runner of 4 workers whose pool has slots slots
// under blocking.
func startPoolRunner(h *harness, hold *holder, slots int, blocking PoolBlocking) *Runner {
	return h.start(func(c *Config) {
		c.Handlers = map[string]target.Handler{"hold": hold}
		c.Concurrency = 4
		c.PoolSlots = slots
		c.PoolBlocking = blocking
	})
}

// waitQueued waits until the runner has n fetched runs waiting for a slot.
func waitQueued(t *testing.T, r *Runner, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		r.in.mu.Lock()
		defer r.in.mu.Unlock()
		return r.in.queues.Size() == n
	}, wait, 5*time.Millisecond, "want %d queued: %s", n, r.in.debugState())
}

// maxConcurrent is the most executions the holder's timeline shows at once.
func maxConcurrent(hold *holder) int {
	n, most := 0, 0
	for _, c := range hold.calls() {
		if len(c) > 6 && c[:6] == "start " {
			n++
		} else {
			n--
		}
		most = max(most, n)
	}
	return most
}

// TestPoolConcurrentRunsUpToTheSlots: with two slots, two runs execute at
// once and a third waits, fetched, until one of them ends.
func TestPoolConcurrentRunsUpToTheSlots(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b func(*testing.T) backends) {
		h := newHarness(t, b(t), steadyTTL)
		hold := newHolder()
		r := startPoolRunner(h, hold, 2, BlockingConcurrent)
		now := time.Now()
		runs := []*sundialv1.Run{
			poolRun(h, "c1", now, sundialv1.Priority_PRIORITY_DEFAULT),
			poolRun(h, "c2", now, sundialv1.Priority_PRIORITY_DEFAULT),
			poolRun(h, "c3", now, sundialv1.Priority_PRIORITY_DEFAULT),
		}
		h.produce(runs...)
		first := <-hold.started
		<-hold.started
		waitQueued(t, r, 1)
		assert.Equal(t, 2, r.pool.inFlight())
		hold.release(first)
		third := <-hold.started
		for _, run := range runs {
			if run.GetRunId() != first {
				hold.release(run.GetRunId())
			}
		}
		for _, run := range runs {
			waitStates(t, h, run.GetRunId(), started, succeeded)
		}
		logOverlapTimeline(t, h, hold)
		assert.Less(t, hold.callIndex("end "+first), hold.callIndex("start "+third), "calls %v", hold.calls())
		assert.Equal(t, 2, maxConcurrent(hold), "calls %v", hold.calls())
	})
}

// priorityOrder holds one run on a single slot, then queues a low-priority
// run and, after it, a high-priority one, and returns the order in which
// the two started once the slot freed.
func priorityOrder(t *testing.T, b backends, blocking PoolBlocking) (low, high string, calls []string) {
	h := newHarness(t, b, steadyTTL)
	hold := newHolder()
	r := startPoolRunner(h, hold, 1, blocking)
	now := time.Now()
	first := poolRun(h, "first", now, sundialv1.Priority_PRIORITY_DEFAULT)
	lowRun := poolRun(h, "low", now, sundialv1.Priority_PRIORITY_LOW)
	highRun := poolRun(h, "high", now, sundialv1.Priority_PRIORITY_HIGH)
	h.produce(first)
	awaitStart(t, hold, first.GetRunId())
	h.produce(lowRun)
	waitQueued(t, r, 1)
	h.produce(highRun)
	waitQueued(t, r, 2)
	hold.release(first.GetRunId())
	next := <-hold.started
	hold.release(next)
	after := <-hold.started
	hold.release(after)
	for _, run := range []*sundialv1.Run{first, lowRun, highRun} {
		waitStates(t, h, run.GetRunId(), started, succeeded)
	}
	logOverlapTimeline(t, h, hold)
	assert.Equal(t, 1, maxConcurrent(hold), "one slot: one execution at a time; calls %v", hold.calls())
	return lowRun.GetRunId(), highRun.GetRunId(), hold.calls()
}

// TestPoolFIFOStartsInArrivalOrder: under FIFO a low-priority run that
// arrived first starts before a later high-priority one.
func TestPoolFIFOStartsInArrivalOrder(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b func(*testing.T) backends) {
		low, high, calls := priorityOrder(t, b(t), BlockingFIFO)
		assert.Less(t, indexOf(calls, "start "+low), indexOf(calls, "start "+high), "calls %v", calls)
	})
}

// TestPoolConcurrentPicksByPriority is FIFO's contrast: the same arrivals
// under concurrent let the high-priority run pass.
func TestPoolConcurrentPicksByPriority(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b func(*testing.T) backends) {
		low, high, calls := priorityOrder(t, b(t), BlockingConcurrent)
		assert.Less(t, indexOf(calls, "start "+high), indexOf(calls, "start "+low), "calls %v", calls)
	})
}

func indexOf(calls []string, c string) int {
	for i, x := range calls {
		if x == c {
			return i
		}
	}
	return -1
}

// TestPoolDiscardSkipsWhileBusy: with the only slot busy, a run is SKIPPED
// with reason pool_busy and never retried; once the slot is free, the next
// run executes.
func TestPoolDiscardSkipsWhileBusy(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b func(*testing.T) backends) {
		h := newHarness(t, b(t), steadyTTL)
		hold := newHolder()
		startPoolRunner(h, hold, 1, BlockingDiscard)
		now := time.Now()
		first := poolRun(h, "d1", now, sundialv1.Priority_PRIORITY_DEFAULT)
		busy := poolRun(h, "d2", now, sundialv1.Priority_PRIORITY_DEFAULT)
		later := poolRun(h, "d3", now, sundialv1.Priority_PRIORITY_DEFAULT)
		h.produce(first)
		awaitStart(t, hold, first.GetRunId())
		h.produce(busy)
		waitStates(t, h, busy.GetRunId(), skipped)
		hold.release(first.GetRunId())
		waitStates(t, h, first.GetRunId(), started, succeeded)
		h.produce(later)
		awaitStart(t, hold, later.GetRunId())
		hold.release(later.GetRunId())
		waitStates(t, h, later.GetRunId(), started, succeeded)
		logOverlapTimeline(t, h, hold)
		for _, ev := range h.events.all() {
			if ev.GetState() == skipped {
				assert.Equal(t, "pool_busy", ev.GetReason())
			}
		}
		assert.Empty(t, h.enq.Entries(), "a discarded run is not retried")
		assert.Equal(t, -1, hold.callIndex("start "+busy.GetRunId()), "the downstream never saw the discarded run: %v", hold.calls())
	})
}

func TestPoolConfigValidation(t *testing.T) {
	t.Parallel()
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = rc.Close() })
	ls, err := leasing.New(leasing.Config{Client: rc})
	require.NoError(t, err)
	base := func() Config {
		return Config{Kafka: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, Leases: ls, Redis: rc, Enqueuer: &fakeEnqueuer{}}
	}
	tests := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"unknown blocking", func(c *Config) { c.PoolBlocking = "lifo" }, "PoolBlocking"},
		{"slots above concurrency", func(c *Config) { c.Concurrency = 2; c.PoolSlots = 3 }, "PoolSlots: 3 is above Concurrency 2"},
		{"discard without a spare worker", func(c *Config) { c.Concurrency = 2; c.PoolBlocking = BlockingDiscard }, "PoolSlots: 2 is not below Concurrency 2"},
		{"negative slots", func(c *Config) { c.PoolSlots = -1 }, "PoolSlots: -1 is not positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := base()
			tt.mod(&c)
			assert.ErrorContains(t, c.Validate(), tt.want)
		})
	}
	c := base()
	c.Concurrency, c.PoolSlots, c.PoolBlocking = 4, 3, BlockingDiscard
	assert.NoError(t, c.Validate())
	_, err = ParsePoolBlocking("fifo")
	assert.NoError(t, err)
}

// TestRunnerAnnouncesItsPool: a runner is a member of its pool in the
// directory, with its slots, blocking policy and runs in flight, and leaves
// it (tombstone) when it stops.
func TestRunnerAnnouncesItsPool(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b func(*testing.T) backends) {
		h := newHarness(t, b(t), steadyTTL)
		dir, err := discovery.NewDirectory(discovery.DirectoryConfig{Kafka: []kgo.Opt{kgo.SeedBrokers(h.b.brokers...)}, Topics: h.b.names, Tick: 50 * time.Millisecond})
		require.NoError(t, err)
		require.NoError(t, dir.Start(context.Background()))
		t.Cleanup(dir.Stop)
		hold := newHolder()
		r := h.start(func(c *Config) {
			c.Handlers = map[string]target.Handler{"hold": hold}
			c.Concurrency = 4
			c.PoolSlots = 3
			c.PoolBlocking = BlockingFIFO
			c.Pool = "reports"
			c.Labels = map[string]string{"zone": "a"}
			c.AnnounceInterval = 100 * time.Millisecond
		})
		run := poolRun(h, "announced", time.Now(), sundialv1.Priority_PRIORITY_DEFAULT)
		run.Pool = "reports" // a runner executes the handler runs of its pool's jobs only
		h.produce(run)
		awaitStart(t, hold, run.GetRunId())
		member := func() discovery.Member {
			for _, m := range dir.Live("reports") {
				if m.ID == r.cfg.ID {
					return m
				}
			}
			return discovery.Member{}
		}
		require.Eventually(t, func() bool { return member().InFlight == 1 }, wait, 20*time.Millisecond)
		m := member()
		assert.Equal(t, 3, m.Capacity)
		assert.Equal(t, "fifo", m.Blocking)
		assert.Equal(t, map[string]string{"zone": "a"}, m.Labels)
		hold.release(run.GetRunId())
		waitStates(t, h, run.GetRunId(), started, succeeded)
		r.Stop()
		require.Eventually(t, func() bool { m, ok := dir.Member(r.cfg.ID); return ok && m.State == discovery.Left }, wait, 20*time.Millisecond)
		assert.Empty(t, dir.Live("reports"))
	})
}

// TestPoolDiscardDropsADuplicate: a redelivery of a run already done that
// finds the slot busy is dropped as a duplicate, not recorded as SKIPPED
// after its success.
func TestPoolDiscardDropsADuplicate(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b func(*testing.T) backends) {
		h := newHarness(t, b(t), steadyTTL)
		hold := newHolder()
		r := startPoolRunner(h, hold, 1, BlockingDiscard)
		now := time.Now()
		done := poolRun(h, "done", now, sundialv1.Priority_PRIORITY_DEFAULT)
		busy := poolRun(h, "busy", now, sundialv1.Priority_PRIORITY_DEFAULT)
		h.produce(done)
		awaitStart(t, hold, done.GetRunId())
		hold.release(done.GetRunId())
		waitStates(t, h, done.GetRunId(), started, succeeded)
		h.produce(busy)
		awaitStart(t, hold, busy.GetRunId())
		h.produce(done) // delivered again while the slot is busy
		require.Eventually(t, func() bool { return testutil.ToFloat64(r.m.runs.WithLabelValues(outcomeDuplicate)) == 1 }, wait, 10*time.Millisecond)
		hold.release(busy.GetRunId())
		waitStates(t, h, busy.GetRunId(), started, succeeded)
		logOverlapTimeline(t, h, hold)
		assert.Equal(t, []sundialv1.RunState{started, succeeded}, h.events.states(done.GetRunId()))
	})
}
