package runner

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sundialhq/sundial/leasing"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/target"
)

// eachBackend runs fn on the in-process backends and on the real stack (the
// latter skipped under -short or without a stack, failed in CI without one).
func eachBackend(t *testing.T, fn func(t *testing.T, b func(t *testing.T) backends)) {
	t.Run("fake", func(t *testing.T) {
		t.Parallel()
		fn(t, fakeBackends)
	})
	t.Run("real", func(t *testing.T) {
		t.Parallel()
		fn(t, func(t *testing.T) backends { return realBackends(t, 2) })
	})
}

// holder is a handler whose executions block until released or cancelled,
// and report when they start.
// Its timeline records when each execution started and ended.
type holder struct {
	mu       sync.Mutex
	started  chan string
	released map[string]chan struct{}
	ended    map[string]error
	tl       *timeline
}

func newHolder() *holder {
	return &holder{started: make(chan string, 100), released: map[string]chan struct{}{}, ended: map[string]error{}, tl: newTimeline()}
}

func (h *holder) ch(runID string) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.released[runID]
	if !ok {
		c = make(chan struct{})
		h.released[runID] = c
	}
	return c
}

func (h *holder) release(runID string) { close(h.ch(runID)) }

func (h *holder) Handle(ctx context.Context, run *sundialv1.Run) error {
	h.tl.add("call", "start "+run.GetRunId())
	h.started <- run.GetRunId()
	select {
	case <-h.ch(run.GetRunId()):
		h.tl.add("call", "end "+run.GetRunId()+" (finished)")
		return nil
	case <-ctx.Done():
		h.mu.Lock()
		h.ended[run.GetRunId()] = context.Cause(ctx)
		h.mu.Unlock()
		h.tl.add("call", fmt.Sprintf("end %s (cancelled: %v)", run.GetRunId(), context.Cause(ctx)))
		return ctx.Err()
	}
}

// calls returns the holder's timeline entries: "start <run>" and
// "end <run> (...)", in order.
func (h *holder) calls() []string {
	var out []string
	for _, e := range h.tl.all() {
		out = append(out, e.what)
	}
	return out
}

// callIndex is the position of the first call entry that starts with
// prefix, -1 if none.
func (h *holder) callIndex(prefix string) int {
	return slices.IndexFunc(h.calls(), func(c string) bool { return strings.HasPrefix(c, prefix) })
}

// logOverlapTimeline prints the holder's timeline (the downstream's view)
// merged with the runner's events, by time.
func logOverlapTimeline(t *testing.T, h *harness, hold *holder) {
	t.Helper()
	entries := hold.tl.all()
	for _, ev := range h.events.all() {
		what := fmt.Sprintf("%s %s", ev.GetRunId(), strings.TrimPrefix(ev.GetState().String(), "RUN_STATE_"))
		if ev.GetReason() != "" {
			what += " reason " + ev.GetReason()
		}
		entries = append(entries, timelineEntry{at: ev.GetTime().AsTime().Sub(hold.tl.start), kind: "event", what: what})
	}
	slices.SortStableFunc(entries, func(a, b timelineEntry) int { return cmp.Compare(a.at, b.at) })
	var b strings.Builder
	for _, e := range entries {
		fmt.Fprintf(&b, "\n  %8s  %-5s %s", e.at.Round(time.Millisecond), e.kind, e.what)
	}
	t.Logf("timeline (call: the downstream; event: the runner's events):%s", b.String())
}

func overlapRun(h *harness, job string, due time.Time, pol sundialv1.OverlapPolicy) *sundialv1.Run {
	return h.run(job, due, func(r *sundialv1.Run) {
		r.Target = &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "hold"}}}
		r.ConcurrencyLimit = 1
		r.OverlapPolicy = pol
		r.QueueDelay = durationpb.New(100 * time.Millisecond)
		r.Timeout = durationpb.New(time.Minute)
	})
}

// produceOverlapping produces a run of job with policy pol, waits until
// hold holds it, and produces the job's next run, due a second later, while
// the first still runs. It returns both.
func produceOverlapping(t *testing.T, h *harness, hold *holder, job string, pol sundialv1.OverlapPolicy) (first, second *sundialv1.Run) {
	t.Helper()
	now := time.Now()
	first = overlapRun(h, job, now, pol)
	second = overlapRun(h, job, now.Add(time.Second), pol)
	h.produce(first)
	awaitStart(t, hold, first.GetRunId())
	h.produce(second)
	return first, second
}

func awaitStart(t *testing.T, hold *holder, runID string) {
	t.Helper()
	select {
	case got := <-hold.started:
		require.Equal(t, runID, got)
	case <-time.After(wait):
		t.Fatalf("run %s did not start", runID)
	}
}

func TestOverlapForbid(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b func(*testing.T) backends) {
		h := newHarness(t, b(t), steadyTTL)
		hold := newHolder()
		h.start(func(c *Config) { c.Handlers = map[string]target.Handler{"hold": hold} })
		first, second := produceOverlapping(t, h, hold, "forbid", sundialv1.OverlapPolicy_OVERLAP_POLICY_FORBID)
		waitStates(t, h, second.GetRunId(), skipped)
		hold.release(first.GetRunId())
		waitStates(t, h, first.GetRunId(), started, succeeded)
		logOverlapTimeline(t, h, hold)
		for _, ev := range h.events.all() {
			if ev.GetState() == skipped {
				assert.Equal(t, "overlap_forbid", ev.GetReason())
			}
		}
		assert.Empty(t, h.enq.Entries())
		// The downstream saw the first run only.
		assert.Equal(t, []string{"start " + first.GetRunId(), "end " + first.GetRunId() + " (finished)"}, hold.calls())
	})
}

func TestOverlapQueue(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b func(*testing.T) backends) {
		h := newHarness(t, b(t), steadyTTL)
		hold := newHolder()
		h.start(func(c *Config) { c.Handlers = map[string]target.Handler{"hold": hold} })
		first, second := produceOverlapping(t, h, hold, "queue", sundialv1.OverlapPolicy_OVERLAP_POLICY_QUEUE)
		// The second waits in 100ms deferrals while the first holds the slot.
		require.Eventually(t, func() bool { return len(h.events.states(second.GetRunId())) >= 2 }, wait, 10*time.Millisecond)
		hold.release(first.GetRunId())
		awaitStart(t, hold, second.GetRunId())
		hold.release(second.GetRunId())
		require.Eventually(t, func() bool {
			s := h.events.states(second.GetRunId())
			return len(s) > 0 && s[len(s)-1] == succeeded
		}, wait, 10*time.Millisecond)
		logOverlapTimeline(t, h, hold)
		// The downstream ran them one after the other.
		assert.Less(t, hold.callIndex("end "+first.GetRunId()), hold.callIndex("start "+second.GetRunId()), "calls %v", hold.calls())
		states := h.events.states(second.GetRunId())
		for _, s := range states[:len(states)-2] {
			assert.Equal(t, deferred, s, "states %v", states)
		}
		assert.Equal(t, []sundialv1.RunState{started, succeeded}, states[len(states)-2:])
		for _, e := range h.enq.Entries() {
			assert.Equal(t, 1, e.Attempt, "queueing spends no attempt")
			next := &sundialv1.Run{}
			require.NoError(t, proto.Unmarshal(e.Payload, next))
			assert.Equal(t, second.GetRunId(), next.GetRunId())
		}
		for _, ev := range h.events.all() {
			if ev.GetState() == deferred {
				assert.Equal(t, "overlap_queue", ev.GetReason())
				assert.EqualValues(t, 1, ev.GetAttempt())
			}
		}
	})
}

func TestOverlapReplace(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b func(*testing.T) backends) {
		h := newHarness(t, b(t), steadyTTL)
		hold := newHolder()
		// Two runners: the replaced execution may live on either.
		h.start(func(c *Config) { c.Handlers = map[string]target.Handler{"hold": hold} })
		h.start(func(c *Config) { c.Handlers = map[string]target.Handler{"hold": hold} })
		first, second := produceOverlapping(t, h, hold, "replace", sundialv1.OverlapPolicy_OVERLAP_POLICY_REPLACE)
		begin := time.Now()
		awaitStart(t, hold, second.GetRunId())
		t.Logf("replacement started %s after the newer run was produced", time.Since(begin).Round(time.Millisecond))
		hold.release(second.GetRunId())
		waitStates(t, h, first.GetRunId(), started, cancelled)
		waitStates(t, h, second.GetRunId(), started, succeeded)
		logOverlapTimeline(t, h, hold)
		// The downstream saw the first cancelled before the second started.
		assert.Less(t, hold.callIndex("end "+first.GetRunId()+" (cancelled"), hold.callIndex("start "+second.GetRunId()), "calls %v", hold.calls())
		hold.mu.Lock()
		assert.ErrorIs(t, hold.ended[first.GetRunId()], errReplaced)
		hold.mu.Unlock()
		for _, ev := range h.events.all() {
			if ev.GetState() == cancelled {
				assert.Equal(t, "replaced", ev.GetReason())
			}
		}
	})
}

// TestReplaceByRevokeWhenTheSignalIsMissed: the execution to replace does
// not hear the pub/sub signal (its runner lost track of it, as an unreachable
// holder would), so the replacing run revokes the lease after the grace
// period; the holder's Keeper loses the lease at its next renewal and the
// marker tells it that it was replaced rather than expired.
func TestReplaceByRevokeWhenTheSignalIsMissed(t *testing.T) {
	t.Parallel()
	// The revoked lease must expire before the newer run gets the slot, so
	// the TTL is short; 3 s leaves a loaded machine room to renew the
	// holder's lease until the revoke.
	h := newHarness(t, fakeBackends(t), 3*time.Second)
	hold := newHolder()
	r := h.start(func(c *Config) {
		c.Handlers = map[string]target.Handler{"hold": hold}
		c.ReplaceGrace = 100 * time.Millisecond
	})
	now := time.Now()
	first := overlapRun(h, "revoke", now, sundialv1.OverlapPolicy_OVERLAP_POLICY_REPLACE)
	h.produce(first)
	awaitStart(t, hold, first.GetRunId())
	r.cancels.mu.Lock()
	delete(r.cancels.running, first.GetRunId()) // the signal finds nothing to cancel
	r.cancels.mu.Unlock()
	second := overlapRun(h, "revoke", now.Add(time.Second), sundialv1.OverlapPolicy_OVERLAP_POLICY_REPLACE)
	h.produce(second)
	awaitStart(t, hold, second.GetRunId())
	hold.release(second.GetRunId())
	waitStates(t, h, first.GetRunId(), started, cancelled)
	waitStates(t, h, second.GetRunId(), started, succeeded)
	hold.mu.Lock()
	assert.ErrorIs(t, hold.ended[first.GetRunId()], leasing.ErrLeaseLost)
	hold.mu.Unlock()
}

// TestAReplacedRunDoesNotComeBack: the record of a run that a newer run
// replaced, delivered again (its runner died between CANCELLED and its
// commit), finds its replace marker when it asks for the lease. It ends
// CANCELLED again, and neither executes nor replaces the run that replaced
// it, whose slot it finds taken.
func TestAReplacedRunDoesNotComeBack(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakeBackends(t), steadyTTL)
	hold := newHolder()
	h.start(func(c *Config) { c.Handlers = map[string]target.Handler{"hold": hold} })
	first, second := produceOverlapping(t, h, hold, "replaced-again", sundialv1.OverlapPolicy_OVERLAP_POLICY_REPLACE)
	awaitStart(t, hold, second.GetRunId())
	waitStates(t, h, first.GetRunId(), started, cancelled)

	// The first run's record again, while the second holds the slot.
	h.produce(first)
	waitStates(t, h, first.GetRunId(), started, cancelled, cancelled)
	for _, ev := range h.events.all() {
		if ev.GetRunId() == first.GetRunId() && ev.GetState() == cancelled {
			assert.Equal(t, "replaced", ev.GetReason())
		}
	}
	assert.Equal(t, []sundialv1.RunState{started}, h.events.states(second.GetRunId()), "the replacement runs on: %s", h.events.describe(second.GetRunId()))
	hold.mu.Lock()
	_, ended := hold.ended[second.GetRunId()]
	hold.mu.Unlock()
	assert.False(t, ended, "the replacement's execution was not stopped")

	// Once the replacement is done, the slot is free: the first run's
	// record, delivered once more, still does not execute.
	hold.release(second.GetRunId())
	waitStates(t, h, second.GetRunId(), started, succeeded)
	h.produce(first)
	waitStates(t, h, first.GetRunId(), started, cancelled, cancelled, cancelled)
	select {
	case id := <-hold.started:
		t.Fatalf("run %s executed again", id)
	default:
	}
}
