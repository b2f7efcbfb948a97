package schedule

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// matches reports whether a naive wall time matches the expression's fields.
func (c cronCalc) matches(w time.Time) bool {
	h, m, s := w.Clock()
	return c.month&(1<<uint(w.Month())) != 0 && c.dayMatches(w) &&
		c.hour&(1<<uint(h)) != 0 && c.minute&(1<<uint(m)) != 0 && c.second&(1<<uint(s)) != 0
}

// bruteForce computes the fire times in (from, to] the slow way, wall time
// by wall time: it asks the zone which instants show each matching wall time
// (none in a gap, two in an overlap) and applies the policies to that. It
// shares no code with next's period walk, so the two check each other.
func bruteForce(c cronCalc, loc *time.Location, n NonexistentPolicy, a AmbiguousPolicy, from, to time.Time) []time.Time {
	offs := []time.Duration{offsetAt(from, loc), offsetAt(to, loc)}
	lowOff, highOff := min(offs[0], offs[1]), max(offs[0], offs[1])
	var out []time.Time
	fire := func(w time.Time) {
		var shows []time.Time // instants whose wall clock reads w
		for _, off := range []time.Duration{highOff, lowOff} {
			if i := w.Add(-off); offsetAt(i, loc) == off && !slices.ContainsFunc(shows, i.Equal) {
				shows = append(shows, i)
			}
		}
		switch {
		case len(shows) == 0 && n == NonexistentShiftForward:
			// A gap opens when the offset grows: the earlier offset is the lower.
			out = append(out, w.Add(-lowOff))
		case len(shows) == 1:
			out = append(out, shows[0])
		case len(shows) == 2 && a == AmbiguousFirst:
			out = append(out, shows[0])
		case len(shows) == 2 && a == AmbiguousSecond:
			out = append(out, shows[1])
		case len(shows) == 2 && a == AmbiguousBoth:
			out = append(out, shows...)
		}
	}
	// Minute by minute, then the seconds of each matching minute.
	for m := wallAt(from, lowOff).Truncate(time.Minute); !m.After(wallAt(to, highOff)); m = m.Add(time.Minute) {
		if !c.matches(m.Add(time.Duration(nextBit(c.second, 0)) * time.Second)) {
			continue
		}
		for s := range 60 {
			if c.second&(1<<uint(s)) != 0 {
				fire(m.Add(time.Duration(s) * time.Second))
			}
		}
	}
	out = slices.DeleteFunc(out, func(t time.Time) bool { return !t.After(from) || t.After(to) })
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return slices.CompactFunc(out, time.Time.Equal)
}

// TestNextMatchesBruteForce compares Next with bruteForce over a day and a
// half around each of the first two transitions of 2026 in zones with
// unusual rules: 30-minute DST (Lord_Howe), a two-hour jump (Troll), a
// +12:45/+13:45 zone (Chatham), a -03:30 zone (St_Johns), negative DST in the
// zone data (Dublin), the southern hemisphere (Sydney), and no DST at all
// (Kathmandu).
func TestNextMatchesBruteForce(t *testing.T) {
	t.Parallel()
	zones := []string{
		"Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Australia/Sydney",
		"Asia/Kathmandu", "Antarctica/Troll", "Pacific/Chatham", "America/St_Johns", "Europe/Dublin",
	}
	exprs := []string{
		"*/15 * * * *",
		"30 2 * * *",
		"0,30 1-3 * * *",
		"10,50 0-4 * * *",
		"*/20 * 1-3 * * *",
		"59 59 1 * * *",
		"0 * * * *",
	}
	for _, zone := range zones {
		loc, err := time.LoadLocation(zone)
		require.NoError(t, err)
		// The first two transitions of 2026, or two plain days without DST.
		var centers []time.Time
		probe := time.Date(2026, 1, 1, 0, 0, 0, 0, loc)
		for range 2 {
			_, end := probe.ZoneBounds()
			if end.IsZero() || end.Year() > 2026 {
				end = probe.Add(40 * 24 * time.Hour)
			}
			centers = append(centers, end)
			probe = end
		}
		for _, center := range centers {
			from, to := center.Add(-18*time.Hour), center.Add(18*time.Hour)
			for _, expr := range exprs {
				for _, n := range []NonexistentPolicy{skip, shift} {
					for _, a := range []AmbiguousPolicy{first, secnd, both} {
						name := zone + " " + center.UTC().Format(time.DateOnly) + " " + expr + " " + n.String() + " " + a.String()
						t.Run(name, func(t *testing.T) {
							t.Parallel()
							s := setup(t, cronSpec(expr, zone, n, a))
							want := bruteForce(s.calc.(cronCalc), loc, n, a, from, to)
							assert.Equal(t, utc(want), utc(s.Between(from, to, 10_000)))
						})
					}
				}
			}
		}
	}
}
