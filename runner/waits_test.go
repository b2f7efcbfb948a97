package runner

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// TestEventsCarryTheTimelineAndTheWait: runs dispatched while no executor
// was live (the runner starts after them) start with the reason
// no_executor, and every event of the delivery carries dispatched,
// received, leased and started times in order; a run dispatched just now
// carries the times and no reason.
func TestEventsCarryTheTimelineAndTheWait(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakeBackends(t), steadyTTL)
	now := time.Now()
	late := h.run("late", now.Add(-30*time.Second), func(r *sundialv1.Run) {
		r.DispatchedAt = timestamppb.New(now.Add(-30 * time.Second))
	})
	h.produce(late)
	h.start(nil)
	fresh := h.run("fresh", time.Now(), func(r *sundialv1.Run) { r.DispatchedAt = timestamppb.Now() })
	h.produce(fresh)
	waitStates(t, h, late.GetRunId(), started, succeeded)
	waitStates(t, h, fresh.GetRunId(), started, succeeded)
	for _, ev := range h.events.all() {
		switch ev.GetRunId() {
		case late.GetRunId():
			assert.Equal(t, "no_executor", ev.GetWaitReason(), ev.GetState())
		case fresh.GetRunId():
			assert.Empty(t, ev.GetWaitReason(), ev.GetState())
		default:
			continue
		}
		require.NotNil(t, ev.GetDispatchedTime(), ev.GetState())
		require.NotNil(t, ev.GetReceivedTime(), ev.GetState())
		require.NotNil(t, ev.GetLeasedTime(), ev.GetState())
		require.NotNil(t, ev.GetStartedTime(), ev.GetState())
		d, rc, l, s := ev.GetDispatchedTime().AsTime(), ev.GetReceivedTime().AsTime(), ev.GetLeasedTime().AsTime(), ev.GetStartedTime().AsTime()
		assert.False(t, rc.Before(d), "received after dispatched")
		assert.False(t, l.Before(rc), "leased after received")
		assert.False(t, s.Before(l), "started after leased")
	}
}
