// Package backoff is the one retry wait of Sundial's loops: capped
// exponential backoff with full jitter, and waits that end with their
// context.
//
// # Invariants
//
//   - The n-th wait of a Backoff (n from 1) is drawn uniformly from
//     (0, cap(n)] with cap(n) = min(Max, Min * 2^(n-1)). Full jitter spreads
//     the retries of many callers that failed together (a broker or store
//     outage) instead of having them return in step.
//   - Every wait ends early when its context ends, and says so: nothing in
//     this package outlives its caller's context, and it starts no
//     goroutine.
//   - Waits use the runtime's timers; they measure a duration, never read
//     the time of day, so they need no injected clock, and code under
//     testing/synctest sees them in its fake time.
//   - Retry stops on success, on the end of ctx, or on an error the caller
//     classifies as permanent (wrapped with ErrPermanent). It never decides
//     on its own that an error is worth retrying: the caller's fn and
//     Permanent do.
//
// The retry policy of runs (runner/retry) is a different thing: it is part
// of a job's definition and decides when a failed run is tried again.
package backoff
