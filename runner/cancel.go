package runner

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sundialhq/sundial/internal/backoff"
)

// reasonCancelled is the reason of the CANCELLED event of a run an operator
// cancelled.
const reasonCancelled = "cancelled"

// Operator cancellation reuses the replace signal (replace.go): SignalCancel
// sets the marker key <prefix>{job}:cancelled:<run>, then publishes the run
// id on <prefix>cancel. The runner executing the run cancels the execution
// at once, and when the attempt ends that way (or by a lost lease) the marker
// makes it CANCELLED, with no retry, rather than replaced or failed.

// cancelledMarkerTTL bounds the life of a cancel marker. Every delivery of
// the run reads it when it takes the lease (leasing.Request.Flags), so it
// must outlive any redelivery of the run: one after a runner died between
// CANCELLED and its commit, or left the attempt undecided.
const cancelledMarkerTTL = 7 * 24 * time.Hour

// The acquire's flags, in order (leasing.Request.Flags): the cancel and
// replace markers always, the suspend marker with Config.Checkpoints.
const (
	flagCancelled = iota
	flagReplaced
	flagSuspend
)

// flagged says whether an acquire found flag i's marker; flags is
// leasing.Lease.Flagged or leasing.NoSlotError.Flagged.
func flagged(flags []bool, i int) bool {
	return i < len(flags) && flags[i]
}

// endedBefore says whether a delivery's acquire found the run cancelled by
// an operator or replaced by a newer run of its job, and the reason of the
// CANCELLED it then ends with, without executing. Such a delivery is a run
// whose CANCELLED was out but not committed (its runner died), or whose
// attempt was left undecided: executing it, or letting it replace the run
// that replaced it, would undo what the cancel or the replace did.
func endedBefore(flags []bool) (string, bool) {
	switch {
	case flagged(flags, flagCancelled):
		return reasonCancelled, true
	case flagged(flags, flagReplaced):
		return reasonReplaced, true
	}
	return "", false
}

func cancelledKey(keyPrefix, jobID, runID string) string {
	return keyPrefix + "{" + jobID + "}:cancelled:" + runID
}

// SignalCancel asks the runner executing runID of jobID to cancel it.
// keyPrefix is the runners' Config.KeyPrefix. The signal reaches a run that
// is executing when it is published (pub/sub keeps nothing); the marker
// reaches every later delivery of the run, which ends CANCELLED without
// executing (its lease's acquire reads the marker).
func SignalCancel(ctx context.Context, rdb redis.UniversalClient, keyPrefix, jobID, runID string) error {
	if err := rdb.Set(ctx, cancelledKey(keyPrefix, jobID, runID), "operator", cancelledMarkerTTL).Err(); err != nil {
		return fmt.Errorf("mark run %s of job %q cancelled: %w", runID, jobID, err)
	}
	if err := rdb.Publish(ctx, cancelChannel(keyPrefix), runID).Err(); err != nil {
		return fmt.Errorf("signal the cancel of run %s of job %q: %w", runID, jobID, err)
	}
	return nil
}

// markers reads and writes the runner's Redis records of runs: the cancel,
// replace and suspend markers, and the fan-out plans and tallies
// (fanout.go).
type markers struct {
	cfg *Config
	log *slog.Logger
}

// set reports whether the marker key exists. Redis is asked until it
// answers, with backoff, while ctx lives (the first ask is made even when
// it has ended): a "no" for want of an answer would turn a cancelled or
// replaced run into a retry of it. The error is ctx's and Redis's last when
// no answer came.
func (r *markers) set(ctx context.Context, key string) (bool, error) {
	var set bool
	ask := context.WithoutCancel(ctx)
	err := backoff.Retry(ctx, backoff.Config{Min: 50 * time.Millisecond, Max: 2 * time.Second,
		OnRetry: func(err error) { r.log.Warn("cannot read a run's marker; retrying", "key", key, "err", err) },
	}, func() error {
		n, err := r.cfg.Redis.Exists(ask, key).Result()
		set = n > 0
		return err
	})
	return set, err
}

// ClearEndMarkers deletes the cancel and replace markers of runID of jobID,
// so that a new attempt an operator asks for (operator.Retry) executes
// rather than ending CANCELLED at its acquire. keyPrefix is the runners'
// Config.KeyPrefix.
func ClearEndMarkers(ctx context.Context, rdb redis.UniversalClient, keyPrefix, jobID, runID string) error {
	if err := rdb.Del(ctx, cancelledKey(keyPrefix, jobID, runID), replacedKey(keyPrefix, jobID, runID)).Err(); err != nil {
		return fmt.Errorf("clear the end markers of run %s of job %q: %w", runID, jobID, err)
	}
	return nil
}
