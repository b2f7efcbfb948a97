package schedule

import (
	"fmt"
	"math/bits"
	"time"
)

// searchYears bounds the search for a cron's next fire time. The longest gap
// between two fire times of an expression that fires at all is eight years:
// "0 0 29 2 *" after 2096-02-29 next fires on 2104-02-29, because 2100 is not
// a leap year. Ten years covers that with room to spare.
const searchYears = 10

// cronCalc matches local wall-clock times against the parsed bit sets of a
// cron expression (bit i set = value i allowed) and maps them to instants
// under the DST policies.
type cronCalc struct {
	second, minute, hour, dom, month, dow uint64
	// domStar and dowStar record whether the day fields were unrestricted,
	// which decides how they combine (see dayMatches).
	domStar, dowStar bool
}

// dayMatches applies the Vixie cron rule: when both day fields are
// restricted, a day matching either fires; when one is unrestricted, only the
// other one constrains.
func (c cronCalc) dayMatches(t time.Time) bool {
	domOK := c.dom&(1<<uint(t.Day())) != 0
	dowOK := c.dow&(1<<uint(t.Weekday())) != 0
	if c.domStar || c.dowStar {
		return domOK && dowOK
	}
	return domOK || dowOK
}

// daysToCandidate is how many days after t's day the next day that may
// match lies, so that nextWall skips to it instead of stepping day by day.
// When only one day field constrains, that is its next allowed value; when
// both do, the nearer of the two. It is at least one; a day in the next
// month (or later) is normalised by time.Date and checked again by nextWall.
func (c cronCalc) daysToCandidate(t time.Time) int {
	byDom, byDow := 1, 1
	if !c.domStar {
		// With no allowed day left in this month, the 1st of the next
		// month is the earliest candidate.
		y, m, d := t.Date()
		monthDays := time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
		byDom = monthDays - d + 1
		if nd := nextBit(c.dom, d+1); nd > 0 && nd <= monthDays {
			byDom = nd - d
		}
	}
	if !c.dowStar {
		wd := int(t.Weekday())
		nd := nextBit(c.dow, wd+1)
		if nd < 0 || nd > 6 {
			nd = nextBit(c.dow, 0) + 7
		}
		byDow = nd - wd
	}
	switch {
	case c.domStar:
		return byDow
	case c.dowStar:
		return byDom
	default:
		return min(byDom, byDow)
	}
}

// canFire reports whether some calendar day matches. Only a restricted
// day-of-month with an unrestricted day-of-week can miss every day (the 30th
// of February); every other combination matches at least one day a week.
// Hours, minutes and seconds always exist on the wall clock.
func (c cronCalc) canFire() bool {
	if c.domStar || !c.dowStar {
		return true
	}
	// Longest month lengths, February counted in a leap year.
	maxDay := [13]int{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}
	for m := 1; m <= 12; m++ {
		if c.month&(1<<uint(m)) == 0 {
			continue
		}
		days := uint64(1)<<uint(maxDay[m]+1) - 2 // bits 1..maxDay
		if c.dom&days != 0 {
			return true
		}
	}
	return false
}

// nextBit returns the smallest set bit of mask at or above from, or -1.
func nextBit(mask uint64, from int) int {
	if from >= 64 {
		return -1
	}
	m := mask >> uint(from) << uint(from)
	if m == 0 {
		return -1
	}
	return bits.TrailingZeros64(m)
}

// nextWall returns the first whole-second wall time w with lo <= w < hi that
// matches the expression. Wall times are naive: they are carried as UTC
// time.Time values, whose calendar has no DST, so stepping through them is
// plain arithmetic.
func (c cronCalc) nextWall(lo, hi time.Time) (time.Time, bool) {
	t := ceilSecond(lo)
	for t.Before(hi) {
		y, mo, d := t.Date()
		h, mi, s := t.Clock()
		if c.month&(1<<uint(mo)) == 0 {
			t = time.Date(y, mo+1, 1, 0, 0, 0, 0, time.UTC)
			continue
		}
		if !c.dayMatches(t) {
			t = time.Date(y, mo, d+c.daysToCandidate(t), 0, 0, 0, 0, time.UTC)
			continue
		}
		if c.hour&(1<<uint(h)) == 0 {
			if nh := nextBit(c.hour, h+1); nh >= 0 && nh < 24 {
				t = time.Date(y, mo, d, nh, 0, 0, 0, time.UTC)
			} else {
				t = time.Date(y, mo, d+1, 0, 0, 0, 0, time.UTC)
			}
			continue
		}
		if c.minute&(1<<uint(mi)) == 0 {
			if nm := nextBit(c.minute, mi+1); nm >= 0 && nm < 60 {
				t = time.Date(y, mo, d, h, nm, 0, 0, time.UTC)
			} else {
				t = time.Date(y, mo, d, h+1, 0, 0, 0, time.UTC)
			}
			continue
		}
		if c.second&(1<<uint(s)) == 0 {
			if ns := nextBit(c.second, s+1); ns >= 0 && ns < 60 {
				t = time.Date(y, mo, d, h, mi, ns, 0, time.UTC)
			} else {
				t = time.Date(y, mo, d, h, mi+1, 0, 0, time.UTC)
			}
			continue
		}
		return t, true
	}
	return time.Time{}, false
}

func ceilSecond(t time.Time) time.Time {
	if r := t.Truncate(time.Second); !r.Equal(t) {
		return r.Add(time.Second)
	}
	return t
}

// wallAt is the naive wall time an instant shows under a UTC offset.
func wallAt(instant time.Time, offset time.Duration) time.Time {
	return instant.UTC().Add(offset)
}

// maxSpans bounds the zone spans one search walks through. Ten years hold
// a few dozen in any zone (two transitions a year, the year boundaries the
// standard library reports past a zone's last explicit transition, and the
// occasional two-day span of the fallback scan), so the cap is only reached
// by a zone database that stops making progress; the search then fails
// rather than spinning.
const maxSpans = 1000

// next walks the zone's offset spans from after onward. Within one span the
// wall clock is the instant plus a fixed offset, so the first matching wall
// time of the span gives its first fire time. The policies trim or extend a
// span's wall range at its ends:
//
//   - a span that begins with clocks falling back shows again wall times the
//     previous span already showed: AmbiguousFirst leaves them out;
//   - a span that ends with clocks falling back shows wall times the next
//     span shows again: AmbiguousSecond leaves them out;
//   - a span that begins with clocks jumping forward follows a gap of wall
//     times no instant shows: NonexistentShiftForward fires a matching gap
//     time w at the instant w would have been under the earlier offset,
//     which lies in the first gap-length of this span.
//
// The walk stops searchYears after after. Every step moves strictly forward
// (spanAt guarantees an end after its probe), and at most maxSpans steps are
// taken.
func (c cronCalc) next(after time.Time, loc *time.Location, nonexistent NonexistentPolicy, ambiguous AmbiguousPolicy) (time.Time, error) {
	t, _, err := c.search(after, loc, nonexistent, ambiguous)
	return t, err
}

// search is next that also reports how many spans it walked, the measure of
// its work that tests and benchmarks bound.
func (c cronCalc) search(after time.Time, loc *time.Location, nonexistent NonexistentPolicy, ambiguous AmbiguousPolicy) (_ time.Time, spans int, _ error) {
	after = after.Round(0)
	limit := after.AddDate(searchYears, 0, 0)
	probe := after
	for spans = 1; spans <= maxSpans; spans++ {
		sp := spanAt(probe, loc)
		start, end, off := sp.start, sp.end, sp.off

		// Wall times of this span that are strictly after after.
		lo := wallAt(after, off).Truncate(time.Second).Add(time.Second)
		stop := limit.Add(time.Nanosecond)
		if !end.IsZero() && end.Before(stop) {
			stop = end
		}
		hi := wallAt(stop, off)

		var best time.Time
		found := false
		if !start.IsZero() {
			if w := wallAt(start, off); w.After(lo) {
				lo = w
			}
			prev := offsetBefore(start, loc)
			switch {
			case prev > off && ambiguous == AmbiguousFirst:
				if w := wallAt(start, prev); w.After(lo) {
					lo = w
				}
			case prev < off && nonexistent == NonexistentShiftForward:
				glo := wallAt(after, prev).Truncate(time.Second).Add(time.Second)
				if w := wallAt(start, prev); w.After(glo) {
					glo = w
				}
				if w, ok := c.nextWall(glo, wallAt(start, off)); ok {
					best, found = w.Add(-prev), true
				}
			}
		}
		if !end.IsZero() && ambiguous == AmbiguousSecond {
			if nextOff := offsetAt(end, loc); nextOff < off {
				if w := wallAt(end, nextOff); w.Before(hi) {
					hi = w
				}
			}
		}
		if w, ok := c.nextWall(lo, hi); ok {
			if t := w.Add(-off); !found || t.Before(best) {
				best, found = t, true
			}
		}
		if found {
			return best, spans, nil
		}
		if end.IsZero() || end.After(limit) {
			return time.Time{}, spans, ErrNoFireTime
		}
		probe = end
	}
	return time.Time{}, maxSpans, &SearchError{Zone: loc.String(), After: after, Reason: fmt.Sprintf("gave up after %d zone offset spans", maxSpans)}
}
