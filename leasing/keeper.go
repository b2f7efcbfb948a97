package leasing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sundialhq/sundial/internal/deps"
	"github.com/sundialhq/sundial/internal/lifecycle"
)

// ErrKeeperStopped is the cause of a Keeper's context after Stop.
var ErrKeeperStopped = errors.New("leasing: keeper stopped")

// ErrLeaseUntrusted is the cause of a Keeper's context when no renewal
// succeeded before the lease's TrustedUntil (Redis unreachable or too slow).
// It wraps ErrLeaseLost.
var ErrLeaseUntrusted = fmt.Errorf("%w: not renewed before it stopped being trusted", ErrLeaseLost)

// Keeper keeps one lease alive while its run executes. It renews the lease
// every TTL/3, measured from when the previous renewal started, and cancels
// its context (Context) as soon as the lease is lost or is no longer trusted:
//
//   - a renewal answered ErrLeaseLost (expired, revoked, keys deleted): at once;
//   - renewals keep failing (Redis unreachable): at the lease's TrustedUntil,
//     by a timer that does not wait for a hung call.
//
// The cause of the cancelled context wraps ErrLeaseLost in both cases (the
// second also ErrLeaseUntrusted), and is ErrKeeperStopped after Stop. A
// Keeper never releases or completes its lease: stop it, then call
// Store.Complete or Store.Release with Lease().
type Keeper struct {
	now    func() time.Time
	renew  func(context.Context, Lease) (Lease, error)
	logger *slog.Logger

	life lifecycle.Lifecycle

	mu    sync.Mutex
	lease Lease
	// ctx is the execution context the Keeper hands out and cancels. It is
	// derived in Start and kept only to be returned by Context; the renewal
	// goroutine receives it as an argument.
	ctx    context.Context
	cancel context.CancelCauseFunc
	trust  *time.Timer
}

// NewKeeper returns a Keeper for l, a lease acquired from store, that renews
// with Store.Renew. A nil logger discards. Batcher.NewKeeper renews in shared
// pipelines instead.
func NewKeeper(store *Store, l Lease, logger *slog.Logger) *Keeper {
	return newKeeper(store.cfg.Now, store.Renew, l, logger)
}

func newKeeper(now func() time.Time, renew func(context.Context, Lease) (Lease, error), l Lease, logger *slog.Logger) *Keeper {
	return &Keeper{now: now, renew: renew, logger: deps.Logger(logger), lease: l}
}

// Start derives the execution context from ctx and starts renewing. It fails
// with ErrLeaseLost, starting nothing, when the lease is already past
// TrustedUntil. Unlike the execution context, the renewals do not end with
// ctx but with Stop. A stopped Keeper may be started again while its lease
// is trusted: it hands out a new execution context.
func (k *Keeper) Start(ctx context.Context) error {
	if err := k.life.Start(ctx, k.start); err != nil {
		return fmt.Errorf("leasing: keeper: %w", err)
	}
	return nil
}

func (k *Keeper) start(ctx context.Context, run *lifecycle.Run) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	l := k.lease
	left := l.TrustedUntil().Sub(k.now())
	if left <= 0 {
		return fmt.Errorf("%s trusted until %s, already past: %w", l, l.TrustedUntil().Format(time.RFC3339Nano), ErrLeaseLost)
	}
	execCtx, cancel := context.WithCancelCause(ctx)
	k.ctx, k.cancel = execCtx, cancel
	k.trust = time.AfterFunc(left, func() { cancel(notRenewed(l)) })
	// After the renewals have ended (and with them the trust timer), the
	// context is cancelled with ErrKeeperStopped, unless it already was.
	run.OnStop(func() { cancel(ErrKeeperStopped) })
	run.Go(func(stop context.Context) {
		defer k.stopTrust()
		k.run(execCtx, stop.Done(), l)
	})
	return nil
}

// stopTrust stops the trust timer: the renewals have ended, so the
// context's end is decided by Stop, a lost lease or the caller's ctx.
func (k *Keeper) stopTrust() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.trust.Stop()
}

// Context is cancelled when the lease is lost or untrusted, or the Keeper
// stops. Run the execution under it. Before Start it is already cancelled.
func (k *Keeper) Context() context.Context {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ctx == nil {
		return notStarted{}
	}
	return k.ctx
}

// Lease returns the lease as last renewed.
func (k *Keeper) Lease() Lease {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lease
}

// Stop stops renewing, cancels the context with ErrKeeperStopped (unless it
// was already cancelled) and returns when the renewal goroutine has exited.
// It is idempotent and safe before Start.
func (k *Keeper) Stop() { k.life.Stop() }

func notRenewed(l Lease) error {
	return fmt.Errorf("%s trusted until %s: %w", l, l.TrustedUntil().Format(time.RFC3339Nano), ErrLeaseUntrusted)
}

// run renews until the lease is lost or untrusted, ctx ends, or quit is
// closed (Stop).
func (k *Keeper) run(ctx context.Context, quit <-chan struct{}, l Lease) {
	now := k.now
	retry := max(l.TTL/10, time.Millisecond)
	next := l.AcquiredAt.Add(l.TTL / 3)
	for {
		if !wait(ctx, quit, next.Sub(now())) {
			return
		}
		// The call may not outlive the trust it is trying to extend.
		callCtx, cancelCall := context.WithTimeout(ctx, l.TrustedUntil().Sub(now()))
		renewed, err := k.renew(callCtx, l)
		cancelCall()
		switch {
		case err == nil:
			if !k.extend(renewed) {
				return // the trust timer fired while the call was out
			}
			l = renewed
			next = l.AcquiredAt.Add(l.TTL / 3)
		case errors.Is(err, ErrLeaseLost):
			k.logger.Warn("lease lost", "job", l.JobID, "run", l.RunID, "token", l.Token, "err", err)
			k.cancel(err)
			return
		case ctx.Err() != nil:
			return
		default:
			k.logger.Warn("lease renewal failed; retrying while the lease is trusted",
				"job", l.JobID, "run", l.RunID, "token", l.Token,
				"trusted_until", l.TrustedUntil(), "retryable", IsRetryable(err), "err", err)
			next = now().Add(retry)
		}
	}
}

// wait returns true after d, false when quit is closed or ctx ends first.
func wait(ctx context.Context, quit <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		select {
		case <-ctx.Done():
			return false
		case <-quit:
			return false
		default:
			return true
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-quit:
		return false
	case <-t.C:
		return true
	}
}

// extend moves the trust deadline to the renewed lease's. It returns false
// when the deadline has already passed: the context is cancelled for good.
func (k *Keeper) extend(l Lease) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.trust.Stop() {
		return false
	}
	k.lease = l
	cancel := k.cancel
	k.trust = time.AfterFunc(l.TrustedUntil().Sub(k.now()), func() { cancel(notRenewed(l)) })
	return true
}

// notStarted is the context of a Keeper before Start: already cancelled, with
// no parent to inherit from.
type notStarted struct{}

func (notStarted) Deadline() (time.Time, bool) { return time.Time{}, false }
func (notStarted) Err() error                  { return context.Canceled }
func (notStarted) Value(any) any               { return nil }

func (notStarted) Done() <-chan struct{} {
	done := make(chan struct{})
	close(done)
	return done
}
