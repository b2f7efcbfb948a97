package runner

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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

func cancelChannel(keyPrefix string) string { return keyPrefix + "cancel" }

func replacedKey(keyPrefix, jobID, runID string) string {
	return keyPrefix + "{" + jobID + "}:replaced:" + runID
}

// replacedMarkerTTL is how long a replaced marker lives: long enough for the
// holder's Keeper to notice the revoke, and for any redelivery of the
// replaced run's record (every acquire reads the marker, endedBefore) after
// its runner died before committing it. At most one marker per replaced
// run: a job replaced every second keeps about 86,400 of them.
const replacedMarkerTTL = 24 * time.Hour

// cancelBoard is the runner's end of the cancel channel: it sends the
// replace signal (signal), knows the executions in flight on this runner
// (track), and cancels the one a signal names (listen).
type cancelBoard struct {
	redis     redis.UniversalClient
	keyPrefix string
	id        string // the runner's, written in the replaced marker
	log       *slog.Logger
	inFlight  prometheus.Gauge

	mu      sync.Mutex
	running map[string]context.CancelCauseFunc // run id -> cancel of its execution
}

func newCancelBoard(cfg Config, log *slog.Logger, inFlight prometheus.Gauge) *cancelBoard {
	return &cancelBoard{redis: cfg.Redis, keyPrefix: cfg.KeyPrefix, id: cfg.ID, log: log, inFlight: inFlight,
		running: map[string]context.CancelCauseFunc{}}
}

// signal marks runID replaced and tells whoever executes it.
func (b *cancelBoard) signal(ctx context.Context, jobID, runID string) error {
	if err := b.redis.Set(ctx, replacedKey(b.keyPrefix, jobID, runID), b.id, replacedMarkerTTL).Err(); err != nil {
		return err
	}
	return b.redis.Publish(ctx, cancelChannel(b.keyPrefix), runID).Err()
}

// subscribe subscribes before Start returns, so a signal sent right after
// is not missed by this runner.
func (b *cancelBoard) subscribe(ctx context.Context) *redis.PubSub {
	sub := b.redis.Subscribe(ctx, cancelChannel(b.keyPrefix))
	if _, err := sub.Receive(ctx); err != nil {
		b.log.Warn("cannot subscribe to the replace channel; replaced runs stop at their next lease renewal", "err", err)
	}
	return sub
}

// listen cancels local executions named on the cancel channel.
func (b *cancelBoard) listen(ctx context.Context, sub *redis.PubSub) {
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
			b.mu.Lock()
			cancel := b.running[msg.Payload]
			b.mu.Unlock()
			if cancel != nil {
				cancel(errReplaced)
			}
		}
	}
}

// track makes the execution of runID cancellable through the cancel channel
// while it runs, and counts it in flight.
func (b *cancelBoard) track(runID string, cancel context.CancelCauseFunc) {
	b.mu.Lock()
	b.running[runID] = cancel
	b.mu.Unlock()
	b.inFlight.Inc()
}

// untrack undoes track once the execution has ended.
func (b *cancelBoard) untrack(runID string) {
	b.mu.Lock()
	delete(b.running, runID)
	b.mu.Unlock()
	b.inFlight.Dec()
}

// reset forgets every execution, for a new run of the Runner.
func (b *cancelBoard) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.running = map[string]context.CancelCauseFunc{}
}
