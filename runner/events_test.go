package runner

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// eventOf returns the first event of runID in state, nil if none.
func (l *eventLog) eventOf(runID string, state sundialv1.RunState) *sundialv1.RunEvent {
	for _, ev := range l.all() {
		if ev.GetRunId() == runID && ev.GetState() == state {
			return ev
		}
	}
	return nil
}

// An attempt that ends within Config.StartedDelay produces its outcome
// alone, carrying its start; a failed one too, and its retry the same.
// Events of one job share a partition and a STARTED is never produced
// after a later event of its delivery, so once the outcome is read the
// states read are all there are.
func TestShortAttemptCarriesItsStartInItsOutcome(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakeBackends(t), steadyTTL)
	h.down.set(func(r *http.Request, n int) (int, http.Header) {
		if r.URL.Path == "/flaky" && n == 1 {
			return http.StatusServiceUnavailable, nil
		}
		return http.StatusOK, nil
	})
	// The default delay (a second) is far longer than these attempts.
	h.start(func(c *Config) { c.StartedDelay = 0 })
	ok := h.run("quick", time.Now(), nil)
	flaky := h.run("flaky", time.Now(), nil)
	h.produce(ok, flaky)

	waitStates(t, h, ok.GetRunId(), succeeded)
	ev := h.events.eventOf(ok.GetRunId(), succeeded)
	require.NotNil(t, ev.GetStartedTime(), "the outcome carries the start: %s", h.events.describe(ok.GetRunId()))
	assert.False(t, ev.GetStartedTime().AsTime().After(ev.GetTime().AsTime()), "started at or before it ended")
	assert.NotNil(t, ev.GetDuration())
	assert.NotNil(t, ev.GetLeasedTime())

	waitStates(t, h, flaky.GetRunId(), failed, retrying, succeeded)
	for _, st := range []sundialv1.RunState{failed, retrying, succeeded} {
		assert.NotNil(t, h.events.eventOf(flaky.GetRunId(), st).GetStartedTime(), "%s carries the start", st)
	}
	assert.Equal(t, 1, h.down.requestsOf(ok.GetRunId()))
}

// An attempt still executing when Config.StartedDelay passes has its
// STARTED produced then, with the time it started, before its outcome.
func TestLongAttemptHasStartedProducedAfterTheDelay(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakeBackends(t), steadyTTL)
	h.down.applyGate = make(chan struct{})
	h.start(func(c *Config) { c.StartedDelay = 20 * time.Millisecond })
	// Timed out only after the test's own bound.
	run := h.run("slow", time.Now(), func(r *sundialv1.Run) { r.Timeout = durationpb.New(2 * wait) })
	h.produce(run)

	require.Eventually(t, func() bool { return h.events.eventOf(run.GetRunId(), started) != nil }, wait, 10*time.Millisecond,
		"STARTED of a run still executing: %s", h.events.describe(run.GetRunId()))
	assert.Equal(t, []sundialv1.RunState{started}, h.events.states(run.GetRunId()), "still executing")
	close(h.down.applyGate)
	waitStates(t, h, run.GetRunId(), started, succeeded)
	st, end := h.events.eventOf(run.GetRunId(), started), h.events.eventOf(run.GetRunId(), succeeded)
	assert.True(t, st.GetTime().AsTime().Before(end.GetTime().AsTime()))
	assert.Equal(t, st.GetStartedTime().AsTime(), end.GetStartedTime().AsTime(), "one start, told twice")
}
