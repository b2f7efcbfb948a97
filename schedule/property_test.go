package schedule

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The property test's size and seed. make test runs the default count; a
// long run sets the environment, for example
// SUNDIAL_SCHEDULE_PROPERTY_CASES=100000.
const (
	envPropertyCases   = "SUNDIAL_SCHEDULE_PROPERTY_CASES"
	envPropertySeed    = "SUNDIAL_SCHEDULE_PROPERTY_SEED"
	defaultPropertyCnt = 300
)

// propertyZones covers the shapes of DST the calculator must handle: one-hour
// changes in both hemispheres, 30-minute (Lord_Howe) and two-hour (Troll)
// changes, negative DST in the zone data (Dublin, Casablanca's Ramadan
// offset, listed explicitly until 2087), transitions at local midnight
// (Havana, Santiago, Asuncion, Azores, Cairo, Beirut) and before it (Nuuk
// and Scoresbysund change at 22:00 or 23:00 the day before), odd offsets
// (St_Johns -03:30, Chatham +12:45, Adelaide +09:30, Kathmandu +05:45) and
// zones that no longer change at all.
var propertyZones = []string{
	"Europe/Berlin", "Europe/London", "Europe/Dublin", "Europe/Chisinau", "Atlantic/Azores",
	"America/New_York", "America/Los_Angeles", "America/St_Johns", "America/Havana",
	"America/Santiago", "America/Asuncion", "America/Nuuk", "America/Scoresbysund",
	"Africa/Cairo", "Africa/Casablanca", "Asia/Beirut", "Asia/Jerusalem", "Asia/Kathmandu",
	"Australia/Sydney", "Australia/Adelaide", "Australia/Lord_Howe", "Pacific/Auckland",
	"Pacific/Chatham", "Antarctica/Troll", "America/Sao_Paulo", "UTC",
}

// propertyYears are the years whose every transition is a case centre:
// current years, the last year of the host's explicit transitions and the
// years after it, the leap-year ends where the standard library's zone bounds
// misbehave, the 2100 non-leap year, and the far end of the promise.
var propertyYears = []int{2025, 2026, 2027, 2037, 2038, 2040, 2099, 2100, 2104, 2199, 2200}

// TestNextMatchesOracle compares the calculator with an oracle that shares
// none of its code: random expressions are generated together with the
// value sets they denote (so the parser is checked too), the oracle walks
// every wall-clock second the expression names in a window and asks the zone
// which instants show it, and the calculator's Between over the same window
// must give exactly those instants. Windows are centred on every offset
// transition of propertyYears in every zone of propertyZones, and on each
// new year, in both zone databases.
func TestNextMatchesOracle(t *testing.T) {
	t.Parallel()
	cases := defaultPropertyCnt
	if v := os.Getenv(envPropertyCases); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "%s", envPropertyCases)
		cases = n
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(envPropertySeed); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "%s", envPropertySeed)
		seed = n
	}
	t.Logf("%d cases, %s=%d", cases, envPropertySeed, seed)

	type centre struct {
		db   zoneDB
		zone string
		loc  *time.Location
		at   time.Time
	}
	var centres []centre
	for _, db := range zoneDBs(t) {
		for _, zone := range propertyZones {
			loc, err := db.load(zone)
			require.NoError(t, err, "%s from %s", zone, db.name)
			for _, y := range propertyYears {
				from := time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC)
				for _, tr := range oracleTransitions(loc, from, from.AddDate(1, 0, 0)) {
					centres = append(centres, centre{db, zone, loc, tr})
				}
				centres = append(centres, centre{db, zone, loc, time.Date(y, 12, 31, 12, 0, 0, 0, loc)})
			}
		}
	}
	t.Logf("%d window centres", len(centres))

	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	var fired, fireTimes int
	for i := range cases {
		c := centres[rng.IntN(len(centres))]
		expr := randomCron(rng, c.at.In(c.loc))
		n := []NonexistentPolicy{skip, shift}[rng.IntN(2)]
		a := []AmbiguousPolicy{first, secnd, both}[rng.IntN(3)]
		from := c.at.Add(-time.Duration(rng.Int64N(int64(30 * time.Hour))))
		to := c.at.Add(time.Duration(rng.Int64N(int64(30 * time.Hour))))
		if rng.IntN(4) == 0 {
			from = from.Add(time.Duration(rng.Int64N(int64(time.Second)))) // a fraction of a second
		}

		spec := cronSpec(expr.text, c.zone, n, a)
		s, err := Compile(spec)
		require.NoError(t, err, "case %d: %q", i, expr.text)
		s.loc = c.loc
		want := expr.oracle(c.loc, n, a, from, to)
		got := s.Between(from, to, len(want)+1)
		if !slices.EqualFunc(want, got, time.Time.Equal) {
			d := 0
			for d < min(len(want), len(got)) && want[d].Equal(got[d]) {
				d++
			}
			lo := max(d-3, 0)
			t.Fatalf("case %d (%s=%d): %q in %s (%s database), %s/%s, window (%s, %s]: %d fire times from the oracle, %d from the calculator, first difference at %d:\n oracle:     %v\n calculator: %v",
				i, envPropertySeed, seed, expr.text, c.zone, c.db.name, n, a,
				from.UTC().Format(time.RFC3339Nano), to.UTC().Format(time.RFC3339Nano), len(want), len(got), d,
				utc(want[lo:min(d+4, len(want))]), utc(got[lo:min(d+4, len(got))]))
		}
		if len(want) > 0 {
			fired++
			fireTimes += len(want)
		}
	}
	t.Logf("%d of %d windows had fire times, %d fire times compared", fired, cases, fireTimes)
}

// oracleTransitions lists the instants in [from, to) where loc's offset
// changes, by sampling every three hours (no zone changes twice in that
// time) and bisecting to the second.
func oracleTransitions(loc *time.Location, from, to time.Time) []time.Time {
	offset := func(t time.Time) int { _, o := t.In(loc).Zone(); return o }
	var out []time.Time
	for lo := from; lo.Before(to); lo = lo.Add(3 * time.Hour) {
		hi := lo.Add(3 * time.Hour)
		if offset(lo) == offset(hi) {
			continue
		}
		a, b := lo.Unix(), hi.Unix() // offset(a) is the old one, offset(b) the new one
		for b-a > 1 {
			if m := (a + b) / 2; offset(time.Unix(m, 0)) == offset(lo) {
				a = m
			} else {
				b = m
			}
		}
		out = append(out, time.Unix(b, 0))
	}
	return out
}

// genCron is a random cron expression with the value sets it denotes.
type genCron struct {
	text string
	// allowed[f][v] says whether value v is allowed in field f (second,
	// minute, hour, day of month, month, day of week).
	allowed [6][]bool
	// domAny and dowAny say whether a day field was written as "*" or "?".
	domAny, dowAny bool
}

// randomCron generates an expression, biased towards the hours around
// midnight and the small hours where transitions happen, and towards the
// local date near (the window's centre) in the day and month fields.
func randomCron(rng *rand.Rand, near time.Time) genCron {
	nearDay := []int{near.Day(), near.AddDate(0, 0, -1).Day(), near.AddDate(0, 0, 1).Day()}
	nearDow := []int{int(near.Weekday()), (int(near.Weekday()) + 1) % 7, (int(near.Weekday()) + 6) % 7}
	bounds := [6][2]int{{0, 59}, {0, 59}, {0, 23}, {1, 31}, {1, 12}, {0, 6}}
	var g genCron
	var parts [6]string
	for f := range 6 {
		lo, hi := bounds[f][0], bounds[f][1]
		g.allowed[f] = make([]bool, hi+1)
		var text string
		var star bool
		switch f {
		case 0: // seconds: mostly the five-field form, else a few values
			if rng.IntN(3) > 0 {
				text = "0"
				g.allowed[f][0] = true
				break
			}
			text = randomList(rng, g.allowed[f], lo, hi, 3, nil)
		case 1: // minutes
			switch rng.IntN(5) {
			case 0:
				text, _ = starOrStep(rng, g.allowed[f], lo, hi, []int{1, 15, 20, 30}) // only day fields' stars matter
			default:
				text = randomList(rng, g.allowed[f], lo, hi, 3, []int{0, 15, 29, 30, 31, 45, 59})
			}
		case 2: // hours
			switch rng.IntN(4) {
			case 0:
				text, _ = starOrStep(rng, g.allowed[f], lo, hi, []int{1, 2, 3, 5})
			default:
				text = randomList(rng, g.allowed[f], lo, hi, 3, []int{0, 1, 2, 3, 4, 22, 23})
			}
		case 3, 5: // day of month, day of week
			if rng.IntN(3) > 0 {
				text, star = starOrStep(rng, g.allowed[f], lo, hi, []int{1})
				if rng.IntN(2) == 0 && star {
					text = "?"
				}
			} else {
				prefer := nearDay
				if f == 5 {
					prefer = nearDow
				}
				text = randomList(rng, g.allowed[f], lo, hi, 4, prefer)
			}
			if f == 3 {
				g.domAny = star
			} else {
				g.dowAny = star
			}
		case 4: // month
			if rng.IntN(3) > 0 {
				text, _ = starOrStep(rng, g.allowed[f], lo, hi, []int{1})
			} else {
				text = randomList(rng, g.allowed[f], lo, hi, 5, []int{int(near.Month())})
			}
		}
		parts[f] = text
	}
	// The oracle's day rule needs at least one matching day in range; an
	// impossible one (the 30th of February alone) is refused by Compile and
	// is tested elsewhere.
	if !g.domAny && g.dowAny {
		ok := false
		for m := 1; m <= 12; m++ {
			for d := 1; d <= 28; d++ {
				ok = ok || g.allowed[4][m] && g.allowed[3][d]
			}
		}
		if !ok {
			for d := 1; d <= 31; d++ {
				g.allowed[3][d] = true
			}
			parts[3], g.domAny = "*", true
		}
	}
	if parts[0] == "0" && rng.IntN(2) == 0 {
		g.text = strings.Join(parts[1:], " ")
	} else {
		g.text = strings.Join(parts[:], " ")
	}
	return g
}

// starOrStep writes "*" or "*/step" and marks the values it allows; it
// reports whether the field is unrestricted (a step of one).
func starOrStep(rng *rand.Rand, allowed []bool, lo, hi int, steps []int) (string, bool) {
	step := steps[rng.IntN(len(steps))]
	for v := lo; v <= hi; v += step {
		allowed[v] = true
	}
	if step == 1 {
		return "*", true
	}
	return fmt.Sprintf("*/%d", step), false
}

// randomList writes a list of up to n elements, each a value, a range or a
// stepped range, preferring the given values when there are some.
func randomList(rng *rand.Rand, allowed []bool, lo, hi, n int, prefer []int) string {
	pick := func() int {
		if len(prefer) > 0 && rng.IntN(3) > 0 {
			return prefer[rng.IntN(len(prefer))]
		}
		return lo + rng.IntN(hi-lo+1)
	}
	var elems []string
	for range 1 + rng.IntN(n) {
		a := pick()
		switch rng.IntN(4) {
		case 0: // a range
			b := a + rng.IntN(hi-a+1)
			for v := a; v <= b; v++ {
				allowed[v] = true
			}
			elems = append(elems, fmt.Sprintf("%d-%d", a, b))
		case 1: // a stepped range
			b := a + rng.IntN(hi-a+1)
			step := 1 + rng.IntN(hi-lo)
			for v := a; v <= b; v += step {
				allowed[v] = true
			}
			elems = append(elems, fmt.Sprintf("%d-%d/%d", a, b, step))
		default:
			allowed[a] = true
			elems = append(elems, strconv.Itoa(a))
		}
	}
	return strings.Join(elems, ",")
}

// matchesWall reports whether the expression names a wall-clock second,
// given as its calendar fields.
func (g genCron) matchesWall(w time.Time) bool {
	dom := g.allowed[3][w.Day()]
	dow := g.allowed[5][int(w.Weekday())]
	day := dom && dow
	if !g.domAny && !g.dowAny {
		day = dom || dow
	}
	return day && g.allowed[4][int(w.Month())] && g.allowed[2][w.Hour()] &&
		g.allowed[1][w.Minute()] && g.allowed[0][w.Second()]
}

// oracle returns the fire times in (from, to]. Wall times are carried as UTC
// time.Time values. Every wall second that the expression names, in a range
// wide enough for any offset, is resolved to the instants that show it: w
// minus each offset the zone uses in the window, kept when the zone agrees
// it shows w then. None is a gap time: shifted forward, it fires at w minus
// the offset before the gap (the lower of the two around it). Two are an
// ambiguous time.
func (g genCron) oracle(loc *time.Location, n NonexistentPolicy, a AmbiguousPolicy, from, to time.Time) []time.Time {
	offset := func(t time.Time) time.Duration { _, o := t.In(loc).Zone(); return time.Duration(o) * time.Second }
	offs := []time.Duration{offset(from), offset(to)}
	for _, tr := range oracleTransitions(loc, from.Add(-24*time.Hour), to.Add(24*time.Hour)) {
		offs = append(offs, offset(tr), offset(tr.Add(-time.Second)))
	}
	slices.Sort(offs)
	offs = slices.Compact(offs)

	var out []time.Time
	wallFrom := from.UTC().Add(offs[0] - 3*time.Hour).Truncate(time.Minute)
	wallTo := to.UTC().Add(offs[len(offs)-1] + 3*time.Hour)
	for m := wallFrom; !m.After(wallTo); m = m.Add(time.Minute) {
		if !g.matchesWall(m.Add(time.Duration(firstAllowed(g.allowed[0])) * time.Second)) {
			continue
		}
		for s := range 60 {
			if !g.allowed[0][s] {
				continue
			}
			w := m.Add(time.Duration(s) * time.Second)
			var shows []time.Time
			for _, o := range offs {
				if i := w.Add(-o); offset(i) == o {
					shows = append(shows, i)
				}
			}
			slices.SortFunc(shows, time.Time.Compare)
			switch {
			case len(shows) == 0 && n == NonexistentShiftForward:
				// The gap is [T+before, T+after) in wall time for the
				// transition T whose offset grew; w-before lies at or after T.
				for _, o := range offs {
					if i := w.Add(-o); offset(i) > o && offset(i.Add(-(offset(i)-o))) == o {
						out = append(out, i)
						break
					}
				}
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
	}
	out = slices.DeleteFunc(out, func(t time.Time) bool { return !t.After(from) || t.After(to) })
	slices.SortFunc(out, time.Time.Compare)
	return slices.CompactFunc(out, time.Time.Equal)
}

func firstAllowed(allowed []bool) int {
	return slices.Index(allowed, true)
}

// TestNextMatchesCalendarOracle checks long searches, where the calculator
// skips months and days, against an oracle that walks the calendar day by
// day in UTC (no DST, so only the calendar is under test): from a random
// instant between 2026 and 2200, the first fire time must be the first
// matching second of the first matching day. It runs a tenth of the cases
// of TestNextMatchesOracle.
func TestNextMatchesCalendarOracle(t *testing.T) {
	t.Parallel()
	cases := defaultPropertyCnt
	if v := os.Getenv(envPropertyCases); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "%s", envPropertyCases)
		cases = n
	}
	cases = max(cases/10, 30)
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(envPropertySeed); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "%s", envPropertySeed)
		seed = n
	}
	t.Logf("%d cases, %s=%d", cases, envPropertySeed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0xca1))
	span := time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC).Sub(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	for i := range cases {
		from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(int64(span))))
		expr := randomCron(rng, from.AddDate(0, 0, rng.IntN(400)))
		s, err := Compile(cronSpec(expr.text, "UTC", skip, first))
		require.NoError(t, err, "case %d: %q", i, expr.text)
		want, wantErr := expr.firstAfter(from)
		got, err := s.NextFireTime(from)
		if wantErr != nil {
			require.ErrorIs(t, err, ErrNoFireTime, "case %d (%s=%d): %q after %s", i, envPropertySeed, seed, expr.text, from)
			continue
		}
		require.NoError(t, err, "case %d (%s=%d): %q after %s", i, envPropertySeed, seed, expr.text, from)
		require.True(t, want.Equal(got), "case %d (%s=%d): %q after %s: oracle %s, calculator %s",
			i, envPropertySeed, seed, expr.text, from, want, got)
	}
}

// firstAfter is the first wall second after from that the expression names,
// read as UTC, within the calculator's ten-year horizon.
func (g genCron) firstAfter(from time.Time) (time.Time, error) {
	day := time.Date(from.Year(), from.Month(), from.Day(), 0, 0, 0, 0, time.UTC)
	horizon := from.AddDate(searchYears, 0, 0)
	for ; !day.After(horizon); day = day.AddDate(0, 0, 1) {
		if !g.matchesWall(day.Add(time.Duration(firstAllowed(g.allowed[2]))*time.Hour +
			time.Duration(firstAllowed(g.allowed[1]))*time.Minute + time.Duration(firstAllowed(g.allowed[0]))*time.Second)) {
			continue
		}
		for h := range 24 {
			for m := range 60 {
				for s := range 60 {
					w := day.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(s)*time.Second)
					if w.After(from) && !w.After(horizon) && g.matchesWall(w) {
						return w, nil
					}
				}
			}
		}
	}
	return time.Time{}, ErrNoFireTime
}
