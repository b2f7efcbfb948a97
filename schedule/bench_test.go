package schedule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// rareExpressions are the expressions whose next occurrence is expensive to
// find: far apart, or on wall times that DST removes or repeats.
var rareExpressions = []string{
	"0 0 29 2 *",          // leap day: up to eight years apart across 2100
	"59 59 23 29 2 *",     // the last second of a leap day
	"59 59 23 31 12 *",    // a yearly second on 31 December
	"0 0 31 4,6,9,11,2 1", // never the 31st there, so Mondays of those months
	"30 2 * * *",          // daily, inside the spring gap and the autumn repeat
	"30 2 * 3,10 0",       // Sundays of the transition months, at 02:30
	"0 0 1 1 *",           // yearly
	"*/15 * * * * *",      // dense, for comparison
}

var benchZones = []string{"Europe/Berlin", "Australia/Lord_Howe", "Antarctica/Troll", "America/New_York", "Pacific/Chatham"}

// benchStarts are the instants each search starts from, round robin: new
// year and the transition seasons of current years, the end of leap years
// after the host's last explicit transition (2037), and the far years up to
// 2200.
func benchStarts() []time.Time {
	var out []time.Time
	for _, y := range []int{2026, 2028, 2037, 2038, 2040, 2096, 2099, 2100, 2104, 2196, 2199, 2200} {
		out = append(out,
			time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC),
			time.Date(y, 3, 28, 23, 0, 0, 0, time.UTC),
			time.Date(y, 10, 3, 12, 0, 0, 0, time.UTC),
			time.Date(y, 12, 30, 23, 30, 0, 0, time.UTC),
			time.Date(y, 12, 31, 12, 0, 0, 0, time.UTC),
		)
	}
	return out
}

// BenchmarkNextRare reports the time to compute one next occurrence (ns/op)
// and the most zone spans one search walked (max-spans, a measure of work
// that does not depend on the machine) for each rare expression, zone and
// zone database. The starting instants rotate through
// benchStarts, so every figure covers years from 2026 to 2200.
func BenchmarkNextRare(b *testing.B) {
	starts := benchStarts()
	for _, db := range zoneDBs(b) {
		for _, zone := range benchZones {
			for _, expr := range rareExpressions {
				b.Run("db="+db.name+"/zone="+zone+"/expr="+expr, func(b *testing.B) {
					s := withZone(b, cronSpec(expr, zone, shift, both), db)
					c := s.calc.(cronCalc)
					maxSpans, i := 0, 0
					for b.Loop() {
						after := starts[i%len(starts)]
						i++
						_, spans, err := c.search(after, s.loc, shift, both)
						if err != nil {
							b.Fatalf("next after %s: %v", after, err)
						}
						maxSpans = max(maxSpans, spans)
					}
					b.ReportMetric(float64(maxSpans), "max-spans")
				})
			}
		}
	}
}

// TestRareSearchesAreShort bounds the work of every search in the
// benchmark's table by the zone spans it walks, which does not depend on the
// machine: the longest one (a leap day across 2100) crosses two spans a year
// for eight years, plus the year boundaries the standard library reports
// past a zone's last explicit transition.
func TestRareSearchesAreShort(t *testing.T) {
	t.Parallel()
	const bound = 40
	starts := benchStarts()
	for _, db := range zoneDBs(t) {
		for _, zone := range benchZones {
			for _, expr := range rareExpressions {
				s := withZone(t, cronSpec(expr, zone, shift, both), db)
				c := s.calc.(cronCalc)
				for _, after := range starts {
					_, spans, err := c.search(after, s.loc, shift, both)
					require.NoError(t, err, "%s %s %s after %s", db.name, zone, expr, after)
					require.LessOrEqual(t, spans, bound, "%s %s %s after %s", db.name, zone, expr, after)
				}
			}
		}
	}
}
