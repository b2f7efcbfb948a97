package jobspec

import (
	"time"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// Occurrences is what the misfire rule reads of a schedule
// (*schedule.Schedule): the first fire time strictly after an instant, or
// false when there is none.
type Occurrences interface {
	Next(after time.Time) (time.Time, bool)
}

// CatchUpPlan is the misfire rule's decision about the occurrences of a
// schedule missed from one due time to now.
type CatchUpPlan struct {
	// Fire are the missed occurrences to fire now, oldest first; each keeps
	// its own due time (and so its own run id).
	Fire []time.Time
	// Covered is the instant up to which every occurrence is decided: now,
	// or the last of Fire when FIRE_ALL reached its limit with more missed
	// occurrences left.
	Covered time.Time
	// Next is the first occurrence after Covered, where the schedule
	// continues; zero when the schedule has none.
	Next time.Time
}

// CatchUp is Sundial's one misfire rule. missed is the due time of an
// occurrence that did not fire in time; it and every occurrence of s after
// it up to now (inclusive) are missed. Of those, only the ones inside the
// catch-up window, at or after now - window, may fire, and policy decides
// which:
//
//   - MISFIRE_POLICY_FIRE_ONCE (and UNSPECIFIED, its default): the latest
//     one, once;
//   - MISFIRE_POLICY_FIRE_ALL: each of them in order, at most limit (at
//     least 1) at once; when more are left, Covered is the last one fired
//     and the caller fires the rest in a later round;
//   - MISFIRE_POLICY_SKIP: none.
//
// missed itself counts as an occurrence even when s would not produce it (a
// one-off compiled against a slightly different reference). A missed due
// time after now is no misfire: nothing fires and Next is missed.
//
// The cost does not grow with the number of missed occurrences: the window
// is entered by a jump to its start, the latest occurrence is found by a
// search that halves the remaining span at every step (at most about 60
// calls of s.Next whatever the window and the period), and FIRE_ALL reads
// limit+1 occurrences at most.
func CatchUp(s Occurrences, policy sundialv1.MisfirePolicy, window time.Duration, missed, now time.Time, limit int) CatchUpPlan {
	if missed.After(now) {
		return CatchUpPlan{Covered: now, Next: missed}
	}
	oldest := now.Add(-window)
	inWindow := !missed.Before(oldest)
	// from is the first instant whose occurrence may fire: the window's
	// start, or missed when that is later.
	from := missed
	if !inWindow {
		from = oldest
	}

	plan := CatchUpPlan{Covered: now}
	switch policy {
	case sundialv1.MisfirePolicy_MISFIRE_POLICY_SKIP:
	case sundialv1.MisfirePolicy_MISFIRE_POLICY_FIRE_ALL:
		limit = max(limit, 1)
		if inWindow {
			plan.Fire = append(plan.Fire, missed)
		}
		// The occurrences strictly after missed, or from the window's start
		// on; one more than room is left for tells whether the limit cut.
		after := missed
		if !inWindow {
			after = oldest.Add(-time.Nanosecond)
		}
		for t := after; len(plan.Fire) <= limit; {
			n, ok := s.Next(t)
			if !ok || n.After(now) {
				break
			}
			plan.Fire = append(plan.Fire, n)
			t = n
		}
		if len(plan.Fire) > limit {
			plan.Fire = plan.Fire[:limit]
			plan.Covered = plan.Fire[limit-1]
		}
	default: // FIRE_ONCE
		if t, ok := latest(s, from, now); ok {
			plan.Fire = []time.Time{t}
		} else if inWindow {
			plan.Fire = []time.Time{missed}
		}
	}
	if n, ok := s.Next(plan.Covered); ok {
		plan.Next = n
	}
	return plan
}

// latest returns the last occurrence t of s with lo <= t <= hi. It
// bisects the instants x in [lo, hi] by whether s.Next(x) is still at or
// before hi, and jumps x forward to just before each occurrence it finds,
// so it calls s.Next about log2((hi-lo)/1ns) times at most, never once per
// occurrence.
func latest(s Occurrences, lo, hi time.Time) (time.Time, bool) {
	// Invariant: s.Next(a) = found <= hi, and s.Next(b) is after hi or
	// absent. The answer is then the occurrence following a, once a and b
	// are adjacent instants.
	a := lo.Add(-time.Nanosecond)
	found, ok := s.Next(a)
	if !ok || found.After(hi) {
		return time.Time{}, false
	}
	b := hi
	for {
		a = found.Add(-time.Nanosecond) // s.Next(a) is still found
		d := b.Sub(a)
		if d <= time.Nanosecond {
			return found, true
		}
		mid := a.Add(d / 2)
		if n, ok := s.Next(mid); ok && !n.After(hi) {
			found = n
		} else {
			b = mid
		}
	}
}
