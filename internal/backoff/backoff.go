package backoff

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Backoff yields the waits between the attempts of one operation. It is not
// safe for concurrent use: each loop has its own.
type Backoff struct {
	min, max time.Duration
	cap      time.Duration
}

// New returns a Backoff whose first wait is at most first and whose waits
// never exceed most. A non-positive first is taken as 1ms, and most below
// first as first: callers validate their configured bounds, and a wait is never zero.
func New(first, most time.Duration) *Backoff {
	if first <= 0 {
		first = time.Millisecond
	}
	b := &Backoff{min: first, max: max(most, first)}
	b.Reset()
	return b
}

// Next returns the next wait and doubles the cap for the one after.
func (b *Backoff) Next() time.Duration {
	d := rand.N(b.cap) + 1
	b.cap = min(2*b.cap, b.max)
	return d
}

// Peek is the cap of the next wait, for logs ("retry in up to ...").
func (b *Backoff) Peek() time.Duration { return b.cap }

// Reset starts the sequence again, after a success.
func (b *Backoff) Reset() { b.cap = b.min }

// Wait sleeps for the next wait; false means ctx ended first.
func (b *Backoff) Wait(ctx context.Context) bool { return Sleep(ctx, b.Next()) }

// Sleep waits for d or the end of ctx; false means ctx ended first.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// ErrPermanent marks the error of Retry when Config.Permanent classified
// it: retrying cannot help (the store refused the arguments as invalid).
var ErrPermanent = errors.New("permanent error")

// Config is how Retry retries.
type Config struct {
	// Min is the first wait's cap.
	Min time.Duration
	// Max is the largest wait.
	Max time.Duration
	// OnRetry, if set, is called with each error that is retried.
	OnRetry func(err error)
	// Permanent, if set, says which errors are not worth retrying; Retry
	// returns them at once, wrapped with ErrPermanent.
	Permanent func(err error) bool
}

// Retry calls fn until it succeeds or ctx ends, waiting between attempts.
// It returns nil, an error wrapping ctx's error and fn's last, or an error
// c.Permanent refuses to retry (errors.Is ErrPermanent).
func Retry(ctx context.Context, c Config, fn func() error) error {
	b := New(c.Min, c.Max)
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("gave up after %w: %w", ctx.Err(), err)
		}
		if c.Permanent != nil && c.Permanent(err) {
			return fmt.Errorf("%w: %w", ErrPermanent, err)
		}
		if c.OnRetry != nil {
			c.OnRetry(err)
		}
		if !b.Wait(ctx) {
			return fmt.Errorf("gave up after %w: %w", ctx.Err(), err)
		}
	}
}
