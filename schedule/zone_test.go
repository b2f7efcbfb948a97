package schedule

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSpanAtContainsInstant checks spanAt where the standard library's zone
// bounds are known to misreport: the last days of leap years past each
// database's last explicit transition. Every span must contain its instant,
// end after it, and carry the offset in effect on both of its edges.
func TestSpanAtContainsInstant(t *testing.T) {
	t.Parallel()
	zones := []string{"Europe/Berlin", "America/New_York", "Australia/Sydney", "Australia/Lord_Howe", "Antarctica/Troll", "Pacific/Chatham", "Asia/Kathmandu", "UTC"}
	for _, db := range zoneDBs(t) {
		for _, zone := range zones {
			t.Run(db.name+" "+zone, func(t *testing.T) {
				t.Parallel()
				loc, err := db.load(zone)
				require.NoError(t, err)
				for _, year := range []int{2028, 2036, 2040, 2096, 2104, 2200} {
					for at := time.Date(year, 12, 30, 0, 0, 0, 0, time.UTC); at.Before(time.Date(year+1, 1, 2, 0, 0, 0, 0, time.UTC)); at = at.Add(17 * time.Minute) {
						sp := spanAt(at, loc)
						require.Equal(t, offsetAt(at, loc), sp.off, "%s", at)
						if !sp.start.IsZero() {
							require.False(t, sp.start.After(at), "span of %s starts at %s", at, sp.start)
							require.Equal(t, sp.off, offsetAt(sp.start, loc), "offset at the start of the span of %s", at)
						}
						if !sp.end.IsZero() {
							require.True(t, sp.end.After(at), "span of %s ends at %s", at, sp.end)
							require.Equal(t, sp.off, offsetAt(sp.end.Add(-time.Nanosecond), loc), "offset before the end of the span of %s", at)
						}
					}
				}
			})
		}
	}
}

// TestNextPastLastTransition runs expressions across the new year of leap
// years in both databases, including 2028, where the compiled-in database
// has long run out of explicit transitions and the standard library reports
// a zone end before the instant asked about.
func TestNextPastLastTransition(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr, zone string
		from       string
		want       []string
	}{
		{
			// Berlin is on CET (+01:00) all winter.
			expr: "30 2 * * *", zone: "Europe/Berlin", from: "2028-12-29T12:00:00Z",
			want: []string{"2028-12-30T01:30:00Z", "2028-12-31T01:30:00Z", "2029-01-01T01:30:00Z", "2029-01-02T01:30:00Z"},
		},
		{
			expr: "59 59 23 31 12 *", zone: "Europe/Berlin", from: "2028-01-01T00:00:00Z",
			want: []string{"2028-12-31T22:59:59Z", "2029-12-31T22:59:59Z", "2030-12-31T22:59:59Z"},
		},
		{
			expr: "30 2 * * *", zone: "Europe/Berlin", from: "2040-12-29T12:00:00Z",
			want: []string{"2040-12-30T01:30:00Z", "2040-12-31T01:30:00Z", "2041-01-01T01:30:00Z"},
		},
		{
			// Sydney is on AEDT (+11:00) over the southern summer.
			expr: "0 * * * *", zone: "Australia/Sydney", from: "2028-12-31T11:30:00Z",
			want: []string{"2028-12-31T12:00:00Z", "2028-12-31T13:00:00Z", "2028-12-31T14:00:00Z"},
		},
		{
			expr: "0 0 29 2 *", zone: "America/New_York", from: "2096-03-01T00:00:00Z",
			want: []string{"2104-02-29T05:00:00Z", "2108-02-29T05:00:00Z"},
		},
		{
			expr: "0 0 0 1 1 *", zone: "Australia/Lord_Howe", from: "2199-06-01T00:00:00Z",
			want: []string{"2199-12-31T13:00:00Z", "2200-12-31T13:00:00Z"},
		},
	}
	for _, db := range zoneDBs(t) {
		for _, tc := range tests {
			t.Run(fmt.Sprintf("%s %s %s %s", db.name, tc.zone, tc.expr, tc.from), func(t *testing.T) {
				t.Parallel()
				s := withZone(t, cronSpec(tc.expr, tc.zone, shift, first), db)
				got, err := PreviewContext(t.Context(), s, mustTime(t, tc.from), len(tc.want))
				require.NoError(t, err)
				assert.Equal(t, tc.want, utc(got))
			})
		}
	}
}
