package runner

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// reasonCancelled is the reason of the CANCELLED event of a run an operator
// cancelled.
const reasonCancelled = "cancelled"

// Operator cancellation reuses the replace signal (replace.go): SignalCancel
// sets the marker key <prefix>{job}:cancelled:<run>, then publishes the run
// id on <prefix>cancel. The runner executing the run cancels the execution
// at once, and when the attempt ends that way (or by a lost lease) the marker
// makes it CANCELLED, with no retry, rather than replaced or failed.

func cancelledKey(keyPrefix, jobID, runID string) string {
	return keyPrefix + "{" + jobID + "}:cancelled:" + runID
}

// SignalCancel asks the runner executing runID of jobID to cancel it.
// keyPrefix is the runners' Config.KeyPrefix. The signal reaches only a run
// that is executing when it is published; a run that starts later is not
// cancelled (pub/sub keeps nothing).
func SignalCancel(ctx context.Context, rdb redis.UniversalClient, keyPrefix, jobID, runID string) error {
	if err := rdb.Set(ctx, cancelledKey(keyPrefix, jobID, runID), "operator", replacedMarkerTTL).Err(); err != nil {
		return fmt.Errorf("mark run %s of job %q cancelled: %w", runID, jobID, err)
	}
	if err := rdb.Publish(ctx, keyPrefix+"cancel", runID).Err(); err != nil {
		return fmt.Errorf("signal the cancel of run %s of job %q: %w", runID, jobID, err)
	}
	return nil
}

// wasCancelled reports whether an operator cancelled runID.
func (r *Runner) wasCancelled(ctx context.Context, jobID, runID string) bool {
	n, err := r.cfg.Redis.Exists(ctx, cancelledKey(r.cfg.KeyPrefix, jobID, runID)).Result()
	return err == nil && n > 0
}
