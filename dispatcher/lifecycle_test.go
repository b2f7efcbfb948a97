package dispatcher

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// TestStartStopTwice stops a dispatcher before it starts and twice in a
// row, starts it again after a Stop, and aborts it before a third Start:
// each run owns every shard and fires a job, and goleak (TestMain) finds
// no goroutine left behind.
func TestStartStopTwice(t *testing.T) {
	t.Parallel()
	const shards = 2
	s := newStack(t, shards)
	d := s.newDispatcher("restart")
	d.Stop() // before Start: nothing to stop
	for i := range 3 {
		require.NoError(t, d.Start(t.Context()), "start %d", i+1)
		require.Error(t, d.Start(t.Context()), "a second Start while running")
		s.waitOwned(d)
		id := fmt.Sprintf("restart-%d", i)
		s.register(t.Context(), []*sundialv1.JobSpec{jobSpec(id, atSchedule(time.Now().Add(time.Second)))}, time.Now)
		require.Eventually(t, func() bool { return len(s.runs.jobRuns(id)) > 0 }, 2*time.Minute, 20*time.Millisecond,
			"run %d fired nothing", i+1)
		if i == 2 {
			d.abort() // as if the process died: still nothing left running
		}
		d.Stop()
		d.Stop()
		require.Empty(t, d.Owned(), "run %d: shards still owned after Stop", i+1)
	}
}
