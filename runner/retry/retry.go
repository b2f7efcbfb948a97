package retry

import (
	"cmp"
	"math"
	"slices"
	"time"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// Defaults of a RetryPolicy's unset fields (see the proto).
const (
	DefaultMaxAttempts    = 3
	DefaultInitialBackoff = time.Second
	DefaultMaxBackoff     = 5 * time.Minute
	DefaultMultiplier     = 2.0
	// MaxRetryAfter bounds how far a downstream's Retry-After can push a
	// retry, so a misbehaving server cannot park a run for a year.
	MaxRetryAfter = time.Hour
)

// Policy is a RetryPolicy with its defaults applied.
type Policy struct {
	MaxAttempts    int
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	Multiplier     float64
	NonRetryable   []string
}

// FromProto applies the defaults to p (nil means every default). Values the
// registry would have rejected (a multiplier below 1, a max below the
// initial) are clamped into range rather than producing nonsense delays.
func FromProto(p *sundialv1.RetryPolicy) Policy {
	out := Policy{
		MaxAttempts:    DefaultMaxAttempts,
		InitialBackoff: DefaultInitialBackoff,
		MaxBackoff:     DefaultMaxBackoff,
		Multiplier:     DefaultMultiplier,
	}
	if p == nil {
		return out
	}
	out.MaxAttempts = cmp.Or(int(p.GetMaxAttempts()), DefaultMaxAttempts)
	if d := p.GetInitialBackoff(); d != nil && d.AsDuration() > 0 {
		out.InitialBackoff = d.AsDuration()
	}
	if d := p.GetMaxBackoff(); d != nil && d.AsDuration() > 0 {
		out.MaxBackoff = d.AsDuration()
	}
	out.MaxBackoff = max(out.MaxBackoff, out.InitialBackoff)
	if m := p.GetMultiplier(); m != 0 {
		out.Multiplier = max(m, 1)
	}
	out.NonRetryable = p.GetNonRetryableErrors()
	return out
}

// Cap is the upper bound of the backoff after failed failed attempts
// (failed >= 1): min(MaxBackoff, InitialBackoff * Multiplier^(failed-1)).
func (p Policy) Cap(failed int) time.Duration {
	if failed < 1 {
		failed = 1
	}
	c := float64(p.InitialBackoff) * math.Pow(p.Multiplier, float64(failed-1))
	if c >= float64(p.MaxBackoff) || math.IsInf(c, 0) || math.IsNaN(c) {
		return p.MaxBackoff
	}
	return time.Duration(c)
}

// Backoff is the full-jitter delay after failed attempts: u * Cap(failed),
// with u drawn uniformly from [0, 1) by the caller. u outside [0, 1) is
// clamped.
func (p Policy) Backoff(failed int, u float64) time.Duration {
	u = min(max(u, 0), math.Nextafter(1, 0))
	return time.Duration(u * float64(p.Cap(failed)))
}

// Failure is what the policy needs to know about a failed attempt.
type Failure struct {
	// Code is the error's machine-readable code (RunError.code).
	Code string
	// Retryable is false for errors that can never succeed on retry.
	Retryable bool
	// RetryAfter is the downstream's minimum wait; 0 for none.
	RetryAfter time.Duration
}

// Decision is what to do after a failed attempt.
type Decision struct {
	// Retry is true when another attempt is due after Delay.
	Retry bool
	Delay time.Duration
	// Reason says why there is no retry: "non_retryable", "non_retryable_code"
	// or "attempts_exhausted". Empty when Retry.
	Reason string
}

// Decide returns the decision after attempt (1 for the first) failed with f;
// u is the jitter draw in [0, 1).
func (p Policy) Decide(attempt int, f Failure, u float64) Decision {
	switch {
	case !f.Retryable:
		return Decision{Reason: "non_retryable"}
	case slices.Contains(p.NonRetryable, f.Code):
		return Decision{Reason: "non_retryable_code"}
	case attempt >= p.MaxAttempts:
		return Decision{Reason: "attempts_exhausted"}
	}
	d := p.Backoff(attempt, u)
	if ra := min(f.RetryAfter, MaxRetryAfter); ra > d {
		d = ra
	}
	return Decision{Retry: true, Delay: d}
}
