package runner

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// TestStartStopTwice stops a runner before it starts and twice in a row,
// starts it again after a Stop, and starts it once more after a simulated
// crash (kill): each run executes a run to success on Kafka and Redis, and
// goleak (TestMain) finds no goroutine left behind.
func TestStartStopTwice(t *testing.T) {
	t.Parallel()
	h := newHarness(t, realBackends(t, 2), steadyTTL)
	r := h.newRunner(nil)
	r.Stop() // before Start: nothing to stop
	for i := range 3 {
		require.NoError(t, r.Start(t.Context()), "start %d", i+1)
		require.Error(t, r.Start(t.Context()), "a second Start while running")
		run := h.run(fmt.Sprintf("restart-%d", i), time.Now(), nil)
		h.produce(run)
		require.Eventually(t, func() bool {
			return slices.Contains(h.events.states(run.GetRunId()), sundialv1.RunState_RUN_STATE_SUCCEEDED)
		}, 2*time.Minute, 20*time.Millisecond, "run %d did not succeed: %s", i+1, h.events.describe(run.GetRunId()))
		if i == 2 {
			r.kill() // as if the process died: Stop only reaps
		}
		r.Stop()
		r.Stop()
	}
}
