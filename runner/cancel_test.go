package runner

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/leasing"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/target"
)

// TestCancelWhenTheSignalIsMissed: an operator's cancel (SignalCancel, then
// a revoke of the lease, as operator.Cancel does) reaches a runner that
// did not hear the signal; the holder's Keeper loses the lease at its next
// renewal, and the marker makes the attempt CANCELLED, not a failure to
// retry. It holds too when Redis does not answer the runner's first reads
// of the marker: an unanswered read is asked again, never taken for "not
// cancelled".
func TestCancelWhenTheSignalIsMissed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// unanswered is how many of the runner's first reads of the cancel
		// marker fail.
		unanswered int32
	}{
		{"marker read at once", 0},
		{"marker unanswered twice", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// A revoked lease is noticed at the holder's next renewal (a
			// third of the TTL); the default TTL keeps a loaded machine's
			// late renewal from losing the lease before the revoke.
			h := newHarness(t, fakeBackends(t), steadyTTL)
			failing := &failMarkerReads{marker: ":cancelled:"}
			failing.left.Store(tc.unanswered)
			runnerRedis := redis.NewClient(&redis.Options{Addr: h.b.redisAddr})
			runnerRedis.AddHook(failing)
			t.Cleanup(func() { _ = runnerRedis.Close() })
			hold := newHolder()
			r := h.start(func(c *Config) {
				c.Handlers = map[string]target.Handler{"hold": hold}
				c.Redis = runnerRedis
			})
			run := h.run("cancel-missed", time.Now(), func(r *sundialv1.Run) {
				r.Target = &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "hold"}}}
			})
			require.Greater(t, run.GetRetry().GetMaxAttempts(), uint32(1), "a misjudged attempt must have a retry to show")
			h.produce(run)
			awaitStart(t, hold, run.GetRunId())
			r.cancels.mu.Lock()
			delete(r.cancels.running, run.GetRunId()) // the signal finds nothing to cancel
			r.cancels.mu.Unlock()

			ctx := t.Context()
			require.NoError(t, SignalCancel(ctx, h.redis, r.cfg.KeyPrefix, run.GetJobId(), run.GetRunId()))
			revoked, err := h.leases.Revoke(ctx, run.GetJobId(), run.GetRunId())
			require.NoError(t, err)
			require.True(t, revoked, "the run held its lease")

			waitStates(t, h, run.GetRunId(), started, cancelled)
			var end *sundialv1.RunEvent
			for _, ev := range h.events.all() {
				if ev.GetRunId() == run.GetRunId() && ev.GetState() == cancelled {
					end = ev
				}
			}
			require.NotNil(t, end)
			assert.Equal(t, reasonCancelled, end.GetReason(), "events %s", h.events.describe(run.GetRunId()))
			hold.mu.Lock()
			assert.ErrorIs(t, hold.ended[run.GetRunId()], leasing.ErrLeaseLost, "the execution ended by the revoke, not the signal")
			hold.mu.Unlock()
			assert.Zero(t, failing.left.Load(), "every failure the test set up was met")
		})
	}
}

// failMarkerReads is a Redis hook that fails the first reads (EXISTS) of
// keys containing marker.
type failMarkerReads struct {
	marker string
	left   atomic.Int32
}

func (f *failMarkerReads) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *failMarkerReads) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.EqualFold(cmd.Name(), "exists") && len(cmd.Args()) > 1 {
			if key, _ := cmd.Args()[1].(string); strings.Contains(key, f.marker) && f.take() {
				err := errors.New("test: marker read refused")
				cmd.SetErr(err)
				return err
			}
		}
		return next(ctx, cmd)
	}
}

// take uses up one of the failures left, if any.
func (f *failMarkerReads) take() bool {
	for {
		n := f.left.Load()
		if n <= 0 {
			return false
		}
		if f.left.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

func (f *failMarkerReads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestACancelledRunNeverExecutesAgain: a delivery of a run an operator
// cancelled (the redelivery after a runner died between CANCELLED and its
// commit, or left the attempt undecided) finds the cancel marker when it
// takes the lease, and ends CANCELLED again without executing.
func TestACancelledRunNeverExecutesAgain(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakeBackends(t), steadyTTL)
	hold := newHolder()
	r := h.start(func(c *Config) { c.Handlers = map[string]target.Handler{"hold": hold} })
	run := h.run("cancel-again", time.Now(), func(r *sundialv1.Run) {
		r.Target = &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "hold"}}}
	})
	h.produce(run)
	awaitStart(t, hold, run.GetRunId())
	require.NoError(t, SignalCancel(t.Context(), h.redis, r.cfg.KeyPrefix, run.GetJobId(), run.GetRunId()))
	waitStates(t, h, run.GetRunId(), started, cancelled)

	// The same record, delivered again.
	h.produce(run)
	waitStates(t, h, run.GetRunId(), started, cancelled, cancelled)
	select {
	case id := <-hold.started:
		t.Fatalf("run %s executed again after its cancel", id)
	default:
	}
	var ends int
	for _, ev := range h.events.all() {
		if ev.GetRunId() == run.GetRunId() && ev.GetState() == cancelled {
			ends++
			assert.Equal(t, reasonCancelled, ev.GetReason())
		}
	}
	assert.Equal(t, 2, ends)
}
