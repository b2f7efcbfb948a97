package schedule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	skip  = NonexistentSkip
	shift = NonexistentShiftForward
	first = AmbiguousFirst
	secnd = AmbiguousSecond
	both  = AmbiguousBoth
)

// previewCase is one expectation: the first len(want) fire times after from.
type previewCase struct {
	name string
	spec Spec
	from string
	want []string // UTC; the comment beside each gives the local time
}

func runPreviewCases(t *testing.T, cases []previewCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, tc.spec)
			got := Preview(s, mustTime(t, tc.from), len(tc.want))
			assert.Equal(t, tc.want, utc(got))
			for _, g := range got {
				assert.Equal(t, s.Location(), g.Location(), "fire times carry the schedule's zone")
			}
		})
	}
}

// Europe/Berlin: on 2026-03-29 at 01:00 UTC the clocks jump from 02:00 CET
// (+01:00) to 03:00 CEST (+02:00); on 2026-10-25 at 01:00 UTC they fall back
// from 03:00 CEST to 02:00 CET, so 02:00-02:59 happens twice.
func TestNextBerlin(t *testing.T) {
	t.Parallel()
	const z = "Europe/Berlin"
	runPreviewCases(t, []previewCase{
		{
			name: "gap skip",
			spec: cronSpec("30 2 * * *", z, skip, first),
			from: "2026-03-28T00:00:00Z",
			want: []string{
				"2026-03-28T01:30:00Z", // 02:30 CET
				// 2026-03-29 02:30 does not exist: skipped
				"2026-03-30T00:30:00Z", // 02:30 CEST
			},
		},
		{
			name: "gap shift forward",
			spec: cronSpec("30 2 * * *", z, shift, first),
			from: "2026-03-28T00:00:00Z",
			want: []string{
				"2026-03-28T01:30:00Z", // 02:30 CET
				"2026-03-29T01:30:00Z", // 02:30 moved by the 1h gap: 03:30 CEST
				"2026-03-30T00:30:00Z", // 02:30 CEST
			},
		},
		{
			// 02:10 and 02:30 shift onto 03:10 and 03:30, which the expression
			// also names: each instant fires once, in time order, although
			// wall-clock order would be 02:10, 02:30, 03:10, 03:30.
			name: "gap shift onto times that exist",
			spec: cronSpec("10,30 2,3 * * *", z, shift, first),
			from: "2026-03-29T00:00:00Z",
			want: []string{
				"2026-03-29T01:10:00Z", // 02:10 shifted = 03:10 CEST
				"2026-03-29T01:30:00Z", // 02:30 shifted = 03:30 CEST
				"2026-03-30T00:10:00Z", // 02:10 CEST
				"2026-03-30T00:30:00Z", // 02:30 CEST
				"2026-03-30T01:10:00Z", // 03:10 CEST
			},
		},
		{
			name: "gap every 20 minutes is not disturbed",
			spec: cronSpec("*/20 * * * *", z, skip, first),
			from: "2026-03-29T00:30:00Z", // 01:30 CET
			want: []string{
				"2026-03-29T00:40:00Z", // 01:40 CET
				"2026-03-29T01:00:00Z", // 03:00 CEST, the instant after 01:59:59 CET
				"2026-03-29T01:20:00Z", // 03:20 CEST
			},
		},
		{
			name: "overlap first",
			spec: cronSpec("30 2 * * *", z, skip, first),
			from: "2026-10-24T00:00:00Z",
			want: []string{
				"2026-10-24T00:30:00Z", // 02:30 CEST
				"2026-10-25T00:30:00Z", // 02:30 CEST, the first of two
				"2026-10-26T01:30:00Z", // 02:30 CET
			},
		},
		{
			name: "overlap second",
			spec: cronSpec("30 2 * * *", z, skip, secnd),
			from: "2026-10-24T00:00:00Z",
			want: []string{
				"2026-10-24T00:30:00Z", // 02:30 CEST
				"2026-10-25T01:30:00Z", // 02:30 CET, the second of two
				"2026-10-26T01:30:00Z", // 02:30 CET
			},
		},
		{
			name: "overlap both",
			spec: cronSpec("30 2 * * *", z, skip, both),
			from: "2026-10-24T00:00:00Z",
			want: []string{
				"2026-10-24T00:30:00Z", // 02:30 CEST
				"2026-10-25T00:30:00Z", // 02:30 CEST
				"2026-10-25T01:30:00Z", // 02:30 CET
				"2026-10-26T01:30:00Z", // 02:30 CET
			},
		},
		{
			// Both minutes of the repeated hour under BOTH come out in instant
			// order: the first pass, then the second.
			name: "overlap both, two times in the hour",
			spec: cronSpec("15,45 2 * * *", z, skip, both),
			from: "2026-10-25T00:00:00Z",
			want: []string{
				"2026-10-25T00:15:00Z", // 02:15 CEST
				"2026-10-25T00:45:00Z", // 02:45 CEST
				"2026-10-25T01:15:00Z", // 02:15 CET
				"2026-10-25T01:45:00Z", // 02:45 CET
				"2026-10-26T01:15:00Z", // 02:15 CET next day
			},
		},
		{
			// From the middle of the first pass: 02:45 CEST has passed and FIRST
			// refuses the second 02:45, so the next one is the following day.
			name: "overlap first from inside the first pass",
			spec: cronSpec("45 2 * * *", z, skip, first),
			from: "2026-10-25T00:50:00Z", // 02:50 CEST
			want: []string{"2026-10-26T01:45:00Z"},
		},
		{
			name: "overlap both from inside the first pass",
			spec: cronSpec("45 2 * * *", z, skip, both),
			from: "2026-10-25T00:50:00Z", // 02:50 CEST
			want: []string{"2026-10-25T01:45:00Z", "2026-10-26T01:45:00Z"},
		},
		{
			// 03:00 is after the repeated hour: it exists once.
			name: "after the overlap",
			spec: cronSpec("0 3 * * *", z, skip, secnd),
			from: "2026-10-24T00:00:00Z",
			want: []string{
				"2026-10-24T01:00:00Z", // 03:00 CEST
				"2026-10-25T02:00:00Z", // 03:00 CET
			},
		},
		{
			name: "daily descriptor is local midnight",
			spec: cronSpec("@daily", z, skip, first),
			from: "2026-03-28T12:00:00Z",
			want: []string{
				"2026-03-28T23:00:00Z", // 2026-03-29 00:00 CET
				"2026-03-29T22:00:00Z", // 2026-03-30 00:00 CEST
			},
		},
	})
}

// America/New_York: 2026-03-08 02:00 EST jumps to 03:00 EDT (07:00 UTC);
// 2026-11-01 02:00 EDT falls back to 01:00 EST (06:00 UTC), repeating
// 01:00-01:59.
func TestNextNewYork(t *testing.T) {
	t.Parallel()
	const z = "America/New_York"
	runPreviewCases(t, []previewCase{
		{
			name: "gap skip",
			spec: cronSpec("30 2 * * *", z, skip, first),
			from: "2026-03-07T12:00:00Z",
			want: []string{
				"2026-03-09T06:30:00Z", // 02:30 EDT; the 8th has no 02:30
			},
		},
		{
			name: "gap shift forward",
			spec: cronSpec("30 2 * * *", z, shift, first),
			from: "2026-03-07T12:00:00Z",
			want: []string{
				"2026-03-08T07:30:00Z", // 03:30 EDT
				"2026-03-09T06:30:00Z", // 02:30 EDT
			},
		},
		{
			name: "overlap first",
			spec: cronSpec("30 1 * * *", z, skip, first),
			from: "2026-10-31T12:00:00Z",
			want: []string{
				"2026-11-01T05:30:00Z", // 01:30 EDT
				"2026-11-02T06:30:00Z", // 01:30 EST
			},
		},
		{
			name: "overlap second",
			spec: cronSpec("30 1 * * *", z, skip, secnd),
			from: "2026-10-31T12:00:00Z",
			want: []string{
				"2026-11-01T06:30:00Z", // 01:30 EST
				"2026-11-02T06:30:00Z",
			},
		},
		{
			name: "overlap both",
			spec: cronSpec("30 1 * * *", z, skip, both),
			from: "2026-10-31T12:00:00Z",
			want: []string{
				"2026-11-01T05:30:00Z", // 01:30 EDT
				"2026-11-01T06:30:00Z", // 01:30 EST
				"2026-11-02T06:30:00Z",
			},
		},
	})
}

// Australia/Lord_Howe moves by 30 minutes. 2026-04-05 02:00 (+11:00) falls
// back to 01:30 (+10:30) at 2026-04-04 15:00 UTC, repeating 01:30-01:59;
// 2026-10-04 02:00 (+10:30) jumps to 02:30 (+11:00) at 2026-10-03 15:30 UTC,
// so 02:00-02:29 does not exist.
func TestNextLordHowe(t *testing.T) {
	t.Parallel()
	const z = "Australia/Lord_Howe"
	runPreviewCases(t, []previewCase{
		{
			name: "gap skip",
			spec: cronSpec("15 2 * * *", z, skip, first),
			from: "2026-10-02T12:00:00Z",
			want: []string{
				"2026-10-02T15:45:00Z", // Oct 3 02:15 +10:30
				// Oct 4 02:15 does not exist
				"2026-10-04T15:15:00Z", // Oct 5 02:15 +11:00
			},
		},
		{
			name: "gap shift forward by half an hour",
			spec: cronSpec("15 2 * * *", z, shift, first),
			from: "2026-10-02T12:00:00Z",
			want: []string{
				"2026-10-02T15:45:00Z", // Oct 3 02:15 +10:30
				"2026-10-03T15:45:00Z", // Oct 4 02:15 + 30m gap = 02:45 +11:00
				"2026-10-04T15:15:00Z", // Oct 5 02:15 +11:00
			},
		},
		{
			// 02:45 is past the half-hour gap and exists.
			name: "just after the gap",
			spec: cronSpec("45 2 * * *", z, skip, first),
			from: "2026-10-03T12:00:00Z",
			want: []string{"2026-10-03T15:45:00Z"}, // Oct 4 02:45 +11:00
		},
		{
			name: "overlap first",
			spec: cronSpec("45 1 * * *", z, skip, first),
			from: "2026-04-04T00:00:00Z",
			want: []string{
				"2026-04-04T14:45:00Z", // Apr 5 01:45 +11:00
				"2026-04-05T15:15:00Z", // Apr 6 01:45 +10:30
			},
		},
		{
			name: "overlap second",
			spec: cronSpec("45 1 * * *", z, skip, secnd),
			from: "2026-04-04T00:00:00Z",
			want: []string{
				"2026-04-04T15:15:00Z", // Apr 5 01:45 +10:30
				"2026-04-05T15:15:00Z",
			},
		},
		{
			name: "overlap both, 30 minutes apart",
			spec: cronSpec("45 1 * * *", z, skip, both),
			from: "2026-04-04T00:00:00Z",
			want: []string{
				"2026-04-04T14:45:00Z", // Apr 5 01:45 +11:00
				"2026-04-04T15:15:00Z", // Apr 5 01:45 +10:30
				"2026-04-05T15:15:00Z",
			},
		},
		{
			// 01:15 comes before the repeated half hour: once only.
			name: "before the overlap",
			spec: cronSpec("15 1 * * *", z, skip, both),
			from: "2026-04-04T00:00:00Z",
			want: []string{
				"2026-04-04T14:15:00Z", // Apr 5 01:15 +11:00
				"2026-04-05T14:45:00Z", // Apr 6 01:15 +10:30
			},
		},
	})
}

// Australia/Sydney, southern hemisphere: DST ends in April and starts in
// October. 2026-04-05 03:00 AEDT (+11) falls back to 02:00 AEST (+10) at
// 2026-04-04 16:00 UTC; 2026-10-04 02:00 AEST jumps to 03:00 AEDT at
// 2026-10-03 16:00 UTC.
func TestNextSydney(t *testing.T) {
	t.Parallel()
	const z = "Australia/Sydney"
	runPreviewCases(t, []previewCase{
		{
			name: "april overlap first",
			spec: cronSpec("30 2 * * *", z, skip, first),
			from: "2026-04-04T00:00:00Z",
			want: []string{
				"2026-04-04T15:30:00Z", // Apr 5 02:30 AEDT
				"2026-04-05T16:30:00Z", // Apr 6 02:30 AEST
			},
		},
		{
			name: "april overlap second",
			spec: cronSpec("30 2 * * *", z, skip, secnd),
			from: "2026-04-04T00:00:00Z",
			want: []string{
				"2026-04-04T16:30:00Z", // Apr 5 02:30 AEST
				"2026-04-05T16:30:00Z",
			},
		},
		{
			name: "october gap skip",
			spec: cronSpec("30 2 * * *", z, skip, first),
			from: "2026-10-03T00:00:00Z",
			want: []string{
				"2026-10-04T15:30:00Z", // Oct 5 02:30 AEDT; Oct 4 has none
			},
		},
		{
			name: "october gap shift forward",
			spec: cronSpec("30 2 * * *", z, shift, first),
			from: "2026-10-03T00:00:00Z",
			want: []string{
				"2026-10-03T16:30:00Z", // Oct 4 03:30 AEDT
				"2026-10-04T15:30:00Z", // Oct 5 02:30 AEDT
			},
		},
	})
}

// Asia/Kathmandu is +05:45 all year: local whole hours are quarter past in UTC.
func TestNextKathmandu(t *testing.T) {
	t.Parallel()
	const z = "Asia/Kathmandu"
	runPreviewCases(t, []previewCase{
		{
			name: "daily at nine",
			spec: cronSpec("0 9 * * *", z, skip, first),
			from: "2026-01-01T00:00:00Z",
			want: []string{"2026-01-01T03:15:00Z", "2026-01-02T03:15:00Z"},
		},
		{
			name: "hourly descriptor",
			spec: cronSpec("@hourly", z, skip, first),
			from: "2026-01-01T00:00:00Z",
			want: []string{"2026-01-01T00:15:00Z", "2026-01-01T01:15:00Z"}, // 06:00, 07:00 local
		},
		{
			// @every is absolute and anchored at the Unix epoch, not at the
			// local hour: it fires on whole UTC hours, 06:45 local.
			name: "every hour is absolute",
			spec: cronSpec("@every 1h", z, skip, first),
			from: "2026-01-01T00:00:00Z",
			want: []string{"2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"},
		},
	})
}

// Calendar edge cases, in UTC so only the calendar is under test.
func TestNextCalendar(t *testing.T) {
	t.Parallel()
	utcCron := func(expr string) Spec { return cronSpec(expr, "UTC", skip, first) }
	runPreviewCases(t, []previewCase{
		{
			name: "leap day from a common year",
			spec: utcCron("0 0 29 2 *"),
			from: "2027-01-01T00:00:00Z",
			want: []string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"},
		},
		{
			// 2100 is divisible by 100 and not by 400: not a leap year, so
			// the longest wait, eight years, is still found.
			name: "leap day across 2100",
			spec: utcCron("0 0 29 2 *"),
			from: "2096-03-01T00:00:00Z",
			want: []string{"2104-02-29T00:00:00Z"},
		},
		{
			name: "the 31st skips 30-day months and February",
			spec: utcCron("0 12 31 * *"),
			from: "2026-01-01T00:00:00Z",
			want: []string{
				"2026-01-31T12:00:00Z",
				"2026-03-31T12:00:00Z",
				"2026-05-31T12:00:00Z",
				"2026-07-31T12:00:00Z",
				"2026-08-31T12:00:00Z",
				"2026-10-31T12:00:00Z",
				"2026-12-31T12:00:00Z",
			},
		},
		{
			name: "year end rolls over",
			spec: utcCron("59 23 31 12 *"),
			from: "2026-12-31T23:59:00Z",
			want: []string{"2027-12-31T23:59:00Z"},
		},
		{
			name: "seconds field every 15 seconds",
			spec: utcCron("*/15 * * * * *"),
			from: "2026-01-01T00:00:00.5Z", // a fraction of a second rounds up
			want: []string{
				"2026-01-01T00:00:15Z",
				"2026-01-01T00:00:30Z",
				"2026-01-01T00:00:45Z",
				"2026-01-01T00:01:00Z",
			},
		},
		{
			name: "six fields: second minute hour",
			spec: utcCron("30 0 9 * * *"),
			from: "2026-01-01T09:00:30Z", // strictly after: today's is not repeated
			want: []string{"2026-01-02T09:00:30Z"},
		},
		{
			name: "five fields mean second zero",
			spec: utcCron("0 9 * * *"),
			from: "2026-01-01T08:59:59.999Z",
			want: []string{"2026-01-01T09:00:00Z"},
		},
		{
			name: "month and day names",
			spec: utcCron("0 0 * feb mon-tue"),
			from: "2026-01-01T00:00:00Z",
			want: []string{"2026-02-02T00:00:00Z", "2026-02-03T00:00:00Z", "2026-02-09T00:00:00Z"}, // Mon, Tue, Mon
		},
	})
}

// 2026-01-01 is a Thursday; from its midnight (exclusive) each descriptor's
// next fire time, in UTC.
func TestNextDescriptors(t *testing.T) {
	t.Parallel()
	from := "2026-01-01T00:00:00Z"
	cases := map[string][]string{
		"@yearly":    {"2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"},
		"@annually":  {"2027-01-01T00:00:00Z"},
		"@monthly":   {"2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"},
		"@weekly":    {"2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"}, // Sundays
		"@daily":     {"2026-01-02T00:00:00Z"},
		"@midnight":  {"2026-01-02T00:00:00Z"},
		"@hourly":    {"2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"},
		"@every 90m": {"2026-01-01T01:30:00Z", "2026-01-01T03:00:00Z"}, // 16 periods a day: the epoch grid meets every midnight
		// 2026-01-01 is 20454 days = 2922 weeks after the epoch, a multiple of 7 s.
		"@every 7s": {"2026-01-01T00:00:07Z", "2026-01-01T00:00:14Z"},
	}
	var tcs []previewCase
	for expr, want := range cases {
		tcs = append(tcs, previewCase{name: expr, spec: cronSpec(expr, "UTC", skip, first), from: from, want: want})
	}
	runPreviewCases(t, tcs)
}

// Day-of-month and day-of-week combine like Vixie cron. February 2026 starts
// on a Sunday: its Mondays are the 2nd, 9th, 16th and 23rd, and March 1 is a
// Sunday.
func TestNextDayOfMonthAndWeek(t *testing.T) {
	t.Parallel()
	utcCron := func(expr string) Spec { return cronSpec(expr, "UTC", skip, first) }
	runPreviewCases(t, []previewCase{
		{
			name: "both restricted: either fires",
			spec: utcCron("0 0 1 * 1"),
			from: "2026-02-01T00:00:00Z",
			want: []string{
				"2026-02-02T00:00:00Z", // Monday
				"2026-02-09T00:00:00Z",
				"2026-02-16T00:00:00Z",
				"2026-02-23T00:00:00Z",
				"2026-03-01T00:00:00Z", // the 1st, a Sunday
				"2026-03-02T00:00:00Z", // Monday
			},
		},
		{
			name: "day of week star: only the day of month",
			spec: utcCron("0 0 1 * *"),
			from: "2026-02-01T00:00:00Z",
			want: []string{"2026-03-01T00:00:00Z", "2026-04-01T00:00:00Z"},
		},
		{
			name: "day of week question mark counts as star",
			spec: utcCron("0 0 1 * ?"),
			from: "2026-02-01T00:00:00Z",
			want: []string{"2026-03-01T00:00:00Z"},
		},
		{
			name: "day of month star: only the day of week",
			spec: utcCron("0 0 * * 1"),
			from: "2026-02-01T00:00:00Z",
			want: []string{"2026-02-02T00:00:00Z", "2026-02-09T00:00:00Z"},
		},
		{
			// "*/10" is a restriction (days 1, 11, 21, 31), so it ORs with Monday.
			name: "a stepped star is a restriction",
			spec: utcCron("0 0 */10 * 1"),
			from: "2026-02-01T00:00:00Z",
			want: []string{
				"2026-02-02T00:00:00Z", // Monday
				"2026-02-09T00:00:00Z", // Monday
				"2026-02-11T00:00:00Z", // the 11th
				"2026-02-16T00:00:00Z", // Monday
				"2026-02-21T00:00:00Z", // the 21st
				"2026-02-23T00:00:00Z", // Monday
				"2026-03-01T00:00:00Z", // the 1st
			},
		},
		{
			// The 31st of February never comes, but Mondays do.
			name: "an impossible day of month still fires on the weekday",
			spec: utcCron("0 0 31 2 1"),
			from: "2026-01-01T00:00:00Z",
			want: []string{"2026-02-02T00:00:00Z"},
		},
	})
}

func TestNextIsStrictlyAfter(t *testing.T) {
	t.Parallel()
	s := setup(t, cronSpec("0 9 * * *", "UTC", skip, first))
	at := mustTime(t, "2026-01-01T09:00:00Z")
	next, ok := s.Next(at)
	require.True(t, ok)
	assert.Equal(t, "2026-01-02T09:00:00Z", next.UTC().Format(time.RFC3339))
	next, ok = s.Next(at.Add(-time.Nanosecond))
	require.True(t, ok)
	assert.True(t, next.Equal(at), "one nanosecond before a fire time finds it: %s", next)
}

// A calculator that cannot match (Compile refuses to build one) gives up
// after the bounded search instead of looping.
func TestNextNeverFiresIsBounded(t *testing.T) {
	t.Parallel()
	c, err := parseCronFields("0 0 30 2 *")
	require.NoError(t, err)
	require.False(t, c.canFire())
	s := &Schedule{spec: cronSpec("0 0 30 2 *", "Europe/Berlin", skip, first), loc: time.UTC, calc: c}
	_, ok := s.Next(mustTime(t, "2026-01-01T00:00:00Z"))
	assert.False(t, ok)
	assert.Empty(t, Preview(s, mustTime(t, "2026-01-01T00:00:00Z"), 3))
}

func TestBetween(t *testing.T) {
	t.Parallel()
	s := setup(t, cronSpec("30 2 * * *", "Europe/Berlin", skip, both))
	from := mustTime(t, "2026-10-24T00:30:00Z") // exactly a fire time: excluded
	to := mustTime(t, "2026-10-26T01:30:00Z")   // exactly a fire time: included

	tests := []struct {
		name  string
		limit int
		want  []string
	}{
		{"all", 100, []string{"2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z", "2026-10-26T01:30:00Z"}},
		{"limited", 2, []string{"2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z"}},
		{"zero limit", 0, []string{}},
		{"negative limit", -1, []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, utc(s.Between(from, to, tc.limit)))
		})
	}
	t.Run("empty window", func(t *testing.T) {
		t.Parallel()
		assert.Empty(t, s.Between(to, from, 10))
	})
}

func TestNilSchedule(t *testing.T) {
	t.Parallel()
	var s *Schedule
	_, ok := s.Next(time.Unix(0, 0))
	assert.False(t, ok)
	assert.Empty(t, Preview(s, time.Unix(0, 0), 3))
}
