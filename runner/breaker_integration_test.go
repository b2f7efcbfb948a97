package runner

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/breaker"
)

// breakerChanges is a slog handler that puts the breakers' state changes
// on a timeline as "from -> to".
type breakerChanges struct{ tl *timeline }

func (breakerChanges) Enabled(context.Context, slog.Level) bool { return true }

func (h breakerChanges) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "circuit breaker changed state" {
		return nil
	}
	var from, to string
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "from":
			from = a.Value.String()
		case "to":
			to = a.Value.String()
		}
		return true
	})
	h.tl.add("breaker", from+" -> "+to)
	return nil
}

func (h breakerChanges) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h breakerChanges) WithGroup(string) slog.Handler      { return h }

// TestBreakerOpensDefersAndRecovers, on the real stack: an HTTP downstream
// fails every call; the breaker opens after exactly its threshold of
// consecutive failures, runs that find it open are deferred without calling
// and with their attempt unchanged, a probe after the open timeout fails
// and opens it again; then the downstream recovers, the next probe closes
// the breaker, and every run succeeds. No run may die: each has 5 attempts,
// while the downstream receives at most 4 failing calls in all, and the
// runs are deferred several times each.
func TestBreakerOpensDefersAndRecovers(t *testing.T) {
	t.Parallel()
	const failures = 3
	const openTimeout = time.Second
	h := newHarness(t, realBackends(t, 2), steadyTTL)
	tl := newTimeline()
	var mu sync.Mutex
	failing := true
	h.down.set(func(r *http.Request, _ int) (int, http.Header) {
		mu.Lock()
		f := failing
		mu.Unlock()
		status := http.StatusOK
		if f {
			status = http.StatusServiceUnavailable
		}
		tl.add("call", fmt.Sprintf("%s attempt %s -> %d", r.Header.Get("Sundial-Run-Id"), r.Header.Get("Sundial-Attempt"), status))
		return status, nil
	})
	r := h.start(func(c *Config) {
		c.Concurrency = 1 // one call at a time, so the breaker counts them in order
		c.Breakers = breaker.Config{Failures: failures, OpenTimeout: openTimeout, Logger: slog.New(breakerChanges{tl})}
	})
	waitAssigned(t, 3*2, r)

	const n = 10
	var runs []*sundialv1.Run
	for i := range n {
		runs = append(runs, h.run("brk-"+strconv.Itoa(i), time.Now(), func(r *sundialv1.Run) { r.Retry.MaxAttempts = 5 }))
	}
	h.produce(runs...)

	// Fail until the breaker has opened, let a probe through, and opened
	// again; then recover.
	changes := func() []string {
		var out []string
		for _, e := range tl.all() {
			if e.kind == "breaker" {
				out = append(out, e.what)
			}
		}
		return out
	}
	require.Eventually(t, func() bool { return len(changes()) >= 3 }, wait, 10*time.Millisecond, "breaker changes %v", changes())
	mu.Lock()
	failing = false
	mu.Unlock()
	tl.add("test", "the downstream recovers")

	succeededRun := func(id string) bool {
		s := h.events.states(id)
		return len(s) > 0 && s[len(s)-1] == succeeded
	}
	require.Eventually(t, func() bool {
		for _, run := range runs {
			if !succeededRun(run.GetRunId()) {
				return false
			}
		}
		return true
	}, wait, 20*time.Millisecond, "first without success: %s", firstMissing(h, runs, succeededRun))
	t.Logf("timeline (calls, breaker state changes):%s", tl)

	// The breaker opened at its threshold, and no call went out while it
	// was open.
	assert.Equal(t, []string{"closed -> open", "open -> half-open", "half-open -> open"}, changes()[:3])
	calls, open := 0, false
	callsBeforeOpen := -1
	for _, e := range tl.all() {
		switch {
		case e.kind == "breaker" && strings.HasSuffix(e.what, "-> open"):
			if callsBeforeOpen < 0 {
				callsBeforeOpen = calls
			}
			open = true
		case e.kind == "breaker":
			open = false
		case e.kind == "call":
			calls++
			assert.False(t, open, "call while the breaker is open: %s", e.what)
		}
	}
	assert.Equal(t, failures, callsBeforeOpen, "the breaker opens at its threshold")

	// Deferrals spend no attempt: a run's successful attempt is the number
	// of calls it made, however often it was deferred.
	totalDeferrals := 0
	var perRun []string
	for _, run := range runs {
		id := run.GetRunId()
		deferrals, final := 0, uint32(0)
		for _, ev := range h.events.all() {
			if ev.GetRunId() != id {
				continue
			}
			switch ev.GetState() {
			case deferred:
				deferrals++
				assert.Equal(t, "circuit_open", ev.GetReason())
			case succeeded:
				final = ev.GetAttempt()
			case dead:
				t.Errorf("run %s died: %s", id, h.events.describe(id))
			}
		}
		totalDeferrals += deferrals
		perRun = append(perRun, fmt.Sprintf("%s: %d calls, %d deferrals, succeeded at attempt %d", id, h.down.requestsOf(id), deferrals, final))
		assert.EqualValues(t, h.down.requestsOf(id), final, "run %s: attempts spent = calls made; events %s", id, h.events.describe(id))
	}
	t.Logf("runs (each has 5 attempts):\n  %s", strings.Join(perRun, "\n  "))
	t.Logf("%d deferrals by the open breaker, %d calls in all", totalDeferrals, calls)
	assert.Greater(t, totalDeferrals, n, "runs were deferred, most more than once")
	f := h.down.figures()
	assert.Equal(t, n, f.effects)
	assert.Zero(t, f.dupEffects)
}
