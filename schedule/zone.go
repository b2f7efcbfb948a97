package schedule

import (
	"fmt"
	"time"
)

// scanStep and scanSteps bound the fallback search for an offset change when
// the standard library's zone bounds cannot be used. No zone changes its
// offset twice within an hour, so sampling hourly and bisecting between two
// samples that differ finds every change; two days of samples cover the
// stretches where the standard library is known to misreport (the last day of
// a leap year past the zone's last explicit transition).
const (
	scanStep  = time.Hour
	scanSteps = 48
)

// span is a stretch [start, end) of instants over which a zone's UTC offset
// is constant. A zero start or end means unbounded on that side. The offset
// may be the same just before start or at end: a bound is where the search
// stopped looking, not necessarily a transition.
type span struct {
	start, end time.Time
	off        time.Duration
}

// spanAt returns a span that contains t.
//
// Time.ZoneBounds is the fast path, but it is not trusted to make progress:
// past the last explicit transition of a zone (the compiled-in database's
// slim files reach this in the 1990s, the host's fat files in 2037) the
// standard library derives the bounds from the zone's rule string, and on the
// last day of a leap year it reports an end that lies before t. Such a bound
// is replaced by one found by sampling the offset.
func spanAt(t time.Time, loc *time.Location) span {
	s := span{off: offsetAt(t, loc)}
	s.start, s.end = t.In(loc).ZoneBounds()
	if !s.end.IsZero() && !s.end.After(t) {
		s.end = scanForward(t, s.off, loc)
	}
	if !s.start.IsZero() && s.start.After(t) {
		s.start = scanBackward(t, s.off, loc)
	}
	return s
}

// scanForward returns the first instant after t where the offset differs
// from off, or, when there is none within scanSteps hours, the instant it
// stopped looking.
func scanForward(t time.Time, off time.Duration, loc *time.Location) time.Time {
	lo := t
	for range scanSteps {
		hi := lo.Add(scanStep)
		if offsetAt(hi, loc) != off {
			return bisect(lo, hi, loc)
		}
		lo = hi
	}
	return lo
}

// scanBackward returns the last instant at or before t where the offset
// became off (the start of its span), or, when there is no change within
// scanSteps hours, the instant it stopped looking.
func scanBackward(t time.Time, off time.Duration, loc *time.Location) time.Time {
	hi := t
	for range scanSteps {
		lo := hi.Add(-scanStep)
		if offsetAt(lo, loc) != off {
			return bisect(lo, hi, loc)
		}
		hi = lo
	}
	return hi
}

// bisect returns the instant in (lo, hi] where the offset stops being the
// offset at lo, assuming exactly one change in between. Zone transitions
// fall on whole seconds, so it stops at one-second resolution.
func bisect(lo, hi time.Time, loc *time.Location) time.Time {
	from := offsetAt(lo, loc)
	lo, hi = lo.Truncate(time.Second), ceilSecond(hi)
	for hi.Sub(lo) > time.Second {
		mid := lo.Add(hi.Sub(lo) / 2).Truncate(time.Second)
		if offsetAt(mid, loc) == from {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// offsetBefore is the offset in effect just before instant t.
func offsetBefore(t time.Time, loc *time.Location) time.Duration {
	return offsetAt(t.Add(-time.Nanosecond), loc)
}

func offsetAt(t time.Time, loc *time.Location) time.Duration {
	_, off := t.In(loc).Zone()
	return time.Duration(off) * time.Second
}

// SearchError reports a search for a fire time that gave up before it could
// tell whether there is one: the zone database answered in a way the bounded
// search could not step through. It is not retryable: the same input gives
// the same answer.
type SearchError struct {
	// Zone is the name of the schedule's time zone.
	Zone string
	// After is the instant the search started from.
	After time.Time
	// Reason says what went wrong.
	Reason string
}

func (e *SearchError) Error() string {
	return fmt.Sprintf("next fire time after %s in zone %s: %s", e.After.UTC().Format(time.RFC3339Nano), e.Zone, e.Reason)
}
