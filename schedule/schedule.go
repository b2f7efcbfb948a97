package schedule

import (
	"math/big"
	"time"
)

// calculator computes the fire times of one kind of schedule.
type calculator interface {
	// next returns the first fire time strictly after after, if there is one
	// within the search horizon.
	next(after time.Time, loc *time.Location, nonexistent NonexistentPolicy, ambiguous AmbiguousPolicy) (time.Time, bool)
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
func (s *Schedule) Next(after time.Time) (time.Time, bool) {
	if s == nil || s.calc == nil {
		return time.Time{}, false
	}
	t, ok := s.calc.next(after, s.loc, s.spec.Nonexistent, s.spec.Ambiguous)
	if !ok {
		return time.Time{}, false
	}
	return t.In(s.loc), true
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
	var out []time.Time
	for t := from; len(out) < n; {
		next, ok := s.Next(t)
		if !ok {
			break
		}
		out = append(out, next)
		t = next
	}
	return out
}

// oneShot fires once, at an instant.
type oneShot struct{ at time.Time }

func (o oneShot) next(after time.Time, _ *time.Location, _ NonexistentPolicy, _ AmbiguousPolicy) (time.Time, bool) {
	if o.at.After(after) {
		return o.at, true
	}
	return time.Time{}, false
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
func (iv interval) next(after time.Time, _ *time.Location, _ NonexistentPolicy, _ AmbiguousPolicy) (time.Time, bool) {
	if iv.every <= 0 {
		return time.Time{}, false
	}
	if iv.bounded && after.Before(iv.anchor) {
		return iv.anchor, true
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
		return time.Time{}, false
	}
	return time.Unix(sec.Int64(), int64(iv.anchor.Nanosecond())+nsec.Int64()), true
}

func unixNanos(t time.Time) *big.Int {
	n := big.NewInt(t.Unix())
	n.Mul(n, big.NewInt(int64(time.Second)))
	return n.Add(n, big.NewInt(int64(t.Nanosecond())))
}
