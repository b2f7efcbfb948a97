package runner

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/quota"
	"github.com/sundialhq/sundial/runner/target"
)

// teamRun is a run of team's job on the "hold" handler, with no job limit.
func teamRun(h *harness, team, job string, due time.Time) *sundialv1.Run {
	return h.run(job, due, func(r *sundialv1.Run) {
		r.OwnerTeam = team
		r.Target = &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "hold"}}}
		r.Timeout = nil
	})
}

// A run over its team's max_concurrent_runs waits (DEFERRED, reason
// team_quota, no attempt spent, never FAILED) until the team's running run
// ends; another team's run is not held back.
func TestTeamQuotaDefersOverTheLimit(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b func(*testing.T) backends) {
		h := newHarness(t, b(t), steadyTTL)
		quotas := quota.NewMemory()
		require.NoError(t, quotas.SetQuota(t.Context(), quota.Quota{Team: "payments", MaxConcurrentRuns: 1}))
		hold := newHolder()
		h.start(func(c *Config) {
			c.Handlers = map[string]target.Handler{"hold": hold}
			c.TeamQuotas = quota.NewCache(quotas, time.Hour, nil)
			c.TeamQuotaDelay = 100 * time.Millisecond
		})
		now := time.Now()
		first := teamRun(h, "payments", "settle", now)
		second := teamRun(h, "payments", "refund", now)
		other := teamRun(h, "search", "reindex", now)
		h.produce(first)
		awaitStart(t, hold, first.GetRunId())
		h.produce(second)
		require.Eventually(t, func() bool { return len(h.events.states(second.GetRunId())) >= 2 }, wait, 10*time.Millisecond,
			"events %s", h.events.describe(second.GetRunId()))
		h.produce(other)
		awaitStart(t, hold, other.GetRunId())
		hold.release(other.GetRunId())
		hold.release(first.GetRunId())
		awaitStart(t, hold, second.GetRunId())
		hold.release(second.GetRunId())
		require.Eventually(t, func() bool {
			s := h.events.states(second.GetRunId())
			return len(s) > 0 && s[len(s)-1] == succeeded
		}, wait, 10*time.Millisecond)
		logOverlapTimeline(t, h, hold)

		assert.Less(t, hold.callIndex("end "+first.GetRunId()), hold.callIndex("start "+second.GetRunId()), "calls %v", hold.calls())
		states := h.events.states(second.GetRunId())
		for _, s := range states[:len(states)-2] {
			assert.Equal(t, deferred, s, "states %v", states)
		}
		assert.Equal(t, []sundialv1.RunState{started, succeeded}, states[len(states)-2:])
		for _, ev := range h.events.all() {
			if ev.GetState() == deferred {
				assert.Equal(t, "team_quota", ev.GetReason())
				assert.Equal(t, second.GetRunId(), ev.GetRunId())
			}
		}
		for _, e := range h.enq.Entries() {
			assert.Equal(t, 1, e.Attempt, "waiting for the team spends no attempt")
		}
		n, err := h.leases.TeamSlotsInUse(t.Context(), "payments")
		require.NoError(t, err)
		assert.Equal(t, 0, n, "every team slot was given back")
	})
}

// orderRecorder is a handler that records the order in which runs start.
type orderRecorder struct {
	mu    sync.Mutex
	order []*sundialv1.Run
}

func (o *orderRecorder) Handle(_ context.Context, run *sundialv1.Run) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.order = append(o.order, run)
	return nil
}

func (o *orderRecorder) started() []*sundialv1.Run {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.order)
}

// Under a herd, one team's backlog does not starve another team: team A's
// runs are all in the topics before team B's, yet B's runs all start before
// A's backlog is done. The queue is small and a team may count only a
// quarter of it, so A's herd neither fills the queue (which would pause the
// topic in front of B's runs) nor stands in front of B's runs once fetched.
func TestFairSharingUnderAHerd(t *testing.T) {
	t.Parallel()
	h := newHarness(t, realBackends(t, 2), steadyTTL)
	const herd, few = 400, 5
	now := time.Now()
	var runs []*sundialv1.Run
	for i := range herd {
		runs = append(runs, h.run(fmt.Sprintf("a-job-%d", i), now, func(r *sundialv1.Run) {
			r.OwnerTeam = "team-a"
			r.Target = &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "record"}}}
		}))
	}
	for i := range few {
		runs = append(runs, h.run(fmt.Sprintf("b-job-%d", i), now, func(r *sundialv1.Run) {
			r.OwnerTeam = "team-b"
			r.Target = &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "record"}}}
		}))
	}
	h.produce(runs...) // A's herd first in every partition, B's runs behind it
	rec := &orderRecorder{}
	h.start(func(c *Config) {
		c.Handlers = map[string]target.Handler{"record": rec}
		c.Concurrency = 2
		c.QueueCapacity = 64
		c.TeamQueueCapacity = 16
	})
	require.Eventually(t, func() bool { return len(rec.started()) >= herd+few }, 2*time.Minute, 20*time.Millisecond,
		"started %d of %d", len(rec.started()), herd+few)

	order := rec.started()
	var bAt []int
	lastA := -1
	for i, r := range order {
		if strings.HasPrefix(r.GetOwnerTeam(), "team-b") {
			bAt = append(bAt, i)
		} else {
			lastA = i
		}
	}
	t.Logf("team B's runs started at positions %v of %d; team A's last at %d", bAt, len(order), lastA)
	require.Len(t, bAt, few)
	assert.Less(t, bAt[len(bAt)-1], lastA, "team B waited for team A's whole backlog")
}
