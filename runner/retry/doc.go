// Package retry decides what happens after a failed attempt of a run: another
// attempt after a backoff, or none (the run is dead).
//
// The backoff before attempt n+1, after n failed attempts, is drawn uniformly
// from [0, cap(n)) with cap(n) = min(MaxBackoff, InitialBackoff *
// Multiplier^(n-1)): exponential backoff with full jitter, which spreads the
// retries of runs that failed together instead of sending them back in a
// herd. The random draw is an argument (a number in [0, 1)), so the package
// is pure: callers inject their source. A downstream's Retry-After is a
// lower bound on the delay, even above MaxBackoff, but never above
// MaxRetryAfter.
//
// A run gets no further attempt when its error is not retryable, when its
// code is listed in the policy's non-retryable errors, or when MaxAttempts
// attempts have been made.
package retry
