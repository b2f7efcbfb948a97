package runner

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// errReplaced is the cause of an execution stopped by a signal on the
// cancel channel: the overlap policy REPLACE of a newer run of its job, or
// an operator's cancel (cancel.go), which its marker tells apart.
var errReplaced = errors.New("runner: replaced by a newer run of the job")

// The replace signal. A run that finds its job's slots full under
// OVERLAP_POLICY_REPLACE picks the oldest holder and
//
//  1. sets the marker key <prefix>{job}:replaced:<run> (so the holder can
//     tell a replacement from an expiry when its lease goes),
//  2. publishes the holder's run id on <prefix>cancel: the runner executing
//     it cancels the execution at once and releases its lease, which frees
//     the slot without waiting for the lease to expire,
//  3. if the slot is still taken after Config.ReplaceGrace (the holder is
//     unreachable or did not hear), revokes the lease through leasing: the
//     holder's Keeper cancels the execution at its next renewal, and the slot
//     frees when the revoked lease expires.
//
// Pub/sub is fire-and-forget, which is why the revoke exists: the signal
// makes replacement fast, the revoke makes it certain.

func (r *Runner) cancelChannel() string { return r.cfg.KeyPrefix + "cancel" }

func (r *Runner) replacedKey(jobID, runID string) string {
	return r.cfg.KeyPrefix + "{" + jobID + "}:replaced:" + runID
}

// replacedMarkerTTL is how long a replaced marker lives: long enough for the
// holder's Keeper to notice the revoke, and for any redelivery of the
// replaced run's record (every acquire reads the marker, endedBefore) after
// its runner died before committing it. At most one marker per replaced
// run: a job replaced every second keeps about 86,400 of them.
const replacedMarkerTTL = 24 * time.Hour

// signalReplace marks runID replaced and tells whoever executes it.
func (r *Runner) signalReplace(ctx context.Context, jobID, runID string) error {
	if err := r.cfg.Redis.Set(ctx, r.replacedKey(jobID, runID), r.cfg.ID, replacedMarkerTTL).Err(); err != nil {
		return err
	}
	return r.cfg.Redis.Publish(ctx, r.cancelChannel(), runID).Err()
}

// subscribeCancels subscribes before Start returns, so a signal sent right
// after is not missed by this runner.
func (r *Runner) subscribeCancels(ctx context.Context) *redis.PubSub {
	sub := r.cfg.Redis.Subscribe(ctx, r.cancelChannel())
	if _, err := sub.Receive(ctx); err != nil {
		r.log.Warn("cannot subscribe to the replace channel; replaced runs stop at their next lease renewal", "err", err)
	}
	return sub
}

// listenCancels cancels local executions named on the cancel channel.
func (r *Runner) listenCancels(ctx context.Context, sub *redis.PubSub) {
	defer func() { _ = sub.Close() }()
	ch := sub.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case msg, ok := <-ch:
			if !ok {
				return
			}
			r.mu.Lock()
			cancel := r.inflight[msg.Payload]
			r.mu.Unlock()
			if cancel != nil {
				cancel(errReplaced)
			}
		}
	}
}

// trackInflight makes the execution of runID cancellable through the cancel
// channel while it runs, and counts it in flight.
func (r *Runner) trackInflight(runID string, cancel context.CancelCauseFunc) {
	r.mu.Lock()
	r.inflight[runID] = cancel
	r.mu.Unlock()
	r.m.inFlight.Inc()
}

// untrackInflight undoes trackInflight once the execution has ended.
func (r *Runner) untrackInflight(runID string) {
	r.mu.Lock()
	delete(r.inflight, runID)
	r.mu.Unlock()
	r.m.inFlight.Dec()
}
