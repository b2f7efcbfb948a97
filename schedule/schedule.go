package schedule

import (
	"context"
	"errors"
	"math/big"
	"time"
)

// ErrNoFireTime means a schedule has no fire time after the instant asked
// about: a one-off whose instant has passed, or a cron expression with no
// match within the search horizon.
var ErrNoFireTime = errors.New("no fire time")

// calculator computes the fire times of one kind of schedule.
type calculator interface {
	// next returns the first fire time strictly after after, ErrNoFireTime
	// when there is none within the search horizon, or a *SearchError when
	// the bounded search gave up.
	next(after time.Time, loc *time.Location, nonexistent NonexistentPolicy, ambiguous AmbiguousPolicy) (time.Time, error)
}

// Schedule is a compiled Spec. It is immutable and safe for concurrent use.
type Schedule struct {
	spec Spec
	loc  *time.Location
	calc calculator
}

// Spec returns the spec the schedule was compiled from.
func (s *Schedule) Spec() Spec { return s.spec }

// Kind returns the schedule's kind.
func (s *Schedule) Kind() Kind { return s.spec.Kind }

// Location returns the schedule's time zone.
func (s *Schedule) Location() *time.Location { return s.loc }

// Next returns the first fire time strictly after after, in the schedule's
// time zone. It returns false when there is none: a one-off whose instant is
// not after after, or a cron whose next match lies beyond the search horizon
// (ten years past after). Calling Next again with the returned time walks the
// fire times in strictly increasing order; the two instants of an ambiguous
// local time under AmbiguousBoth come out as two steps.
//
// Next reports a failed search (see NextFireTime) as false too: a caller that
// must tell "never again" from "could not tell" uses NextFireTime.
func (s *Schedule) Next(after time.Time) (time.Time, bool) {
	t, err := s.NextFireTime(after)
	return t, err == nil
}

// NextFireTime is Next with the reason when there is no fire time:
// ErrNoFireTime when the schedule has none within the search horizon, or a
// *SearchError when the bounded search gave up (a zone database it could not
// step through). The search is bounded in time and memory whatever the
// expression, zone or year.
func (s *Schedule) NextFireTime(after time.Time) (time.Time, error) {
	if s == nil || s.calc == nil {
		return time.Time{}, ErrNoFireTime
	}
	t, err := s.calc.next(after, s.loc, s.spec.Nonexistent, s.spec.Ambiguous)
	if err != nil {
		return time.Time{}, err
	}
	return t.In(s.loc), nil
}

// Between returns the fire times t with from < t <= to, earliest first, at
// most limit of them (none when limit <= 0). The dispatcher uses it to catch
// up from a watermark (exclusive) to now (inclusive) under a misfire policy.
func (s *Schedule) Between(from, to time.Time, limit int) []time.Time {
	var out []time.Time
	for t := from; len(out) < limit; {
		n, ok := s.Next(t)
		if !ok || n.After(to) {
			break
		}
		out = append(out, n)
		t = n
	}
	return out
}

// Preview returns the next n fire times strictly after from, earliest first;
// fewer when the schedule ends sooner.
func Preview(s *Schedule, from time.Time, n int) []time.Time {
	out, _ := PreviewContext(context.Background(), s, from, n)
	return out
}

// PreviewContext is Preview that stops when ctx is done and reports why the
// list is short: ctx's error, or a *SearchError. Running out of fire times is
// not an error. It returns the fire times found so far in every case.
func PreviewContext(ctx context.Context, s *Schedule, from time.Time, n int) ([]time.Time, error) {
	var out []time.Time
	for t := from; len(out) < n; {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		next, err := s.NextFireTime(t)
		if errors.Is(err, ErrNoFireTime) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, next)
		t = next
	}
	return out, nil
}

// oneShot fires once, at an instant.
type oneShot struct{ at time.Time }

func (o oneShot) next(after time.Time, _ *time.Location, _ NonexistentPolicy, _ AmbiguousPolicy) (time.Time, error) {
	if o.at.After(after) {
		return o.at, nil
	}
	return time.Time{}, ErrNoFireTime
}

// interval fires at anchor + k*every: for every integer k when bounded is
// false, for k >= 0 when it is true. It counts absolute time, so DST changes
// nothing.
type interval struct {
	anchor  time.Time
	every   time.Duration
	bounded bool
}

func newInterval(every time.Duration, start time.Time, offset time.Duration) interval {
	if !start.IsZero() {
		return interval{anchor: start, every: every, bounded: true}
	}
	return interval{anchor: time.Unix(0, 0).Add(offset), every: every}
}

// next computes in 128-bit-safe integers: the distance from the anchor can
// exceed the ±292 years a time.Duration holds.
func (iv interval) next(after time.Time, _ *time.Location, _ NonexistentPolicy, _ AmbiguousPolicy) (time.Time, error) {
	if iv.every <= 0 {
		return time.Time{}, ErrNoFireTime
	}
	if iv.bounded && after.Before(iv.anchor) {
		return iv.anchor, nil
	}
	diff := unixNanos(after)
	diff.Sub(diff, unixNanos(iv.anchor))
	every := big.NewInt(int64(iv.every))
	// k = floor(diff/every) + 1; big.Int's Div rounds toward -inf for a
	// positive divisor, which is the floor we need before the anchor too.
	k := new(big.Int).Div(diff, every)
	k.Add(k, big.NewInt(1))
	sec, nsec := new(big.Int).DivMod(k.Mul(k, every), big.NewInt(int64(time.Second)), new(big.Int))
	sec.Add(sec, big.NewInt(iv.anchor.Unix()))
	if !sec.IsInt64() {
		return time.Time{}, ErrNoFireTime
	}
	return time.Unix(sec.Int64(), int64(iv.anchor.Nanosecond())+nsec.Int64()), nil
}

func unixNanos(t time.Time) *big.Int {
	n := big.NewInt(t.Unix())
	n.Mul(n, big.NewInt(int64(time.Second)))
	return n.Add(n, big.NewInt(int64(t.Nanosecond())))
}
