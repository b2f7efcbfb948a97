package schedule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNextInterval(t *testing.T) {
	t.Parallel()
	runPreviewCases(t, []previewCase{
		{
			// The epoch grid with a 15-minute offset: quarter past every UTC hour.
			name: "offset",
			spec: Spec{Kind: KindInterval, TimeZone: "UTC", Every: time.Hour, Offset: 15 * time.Minute},
			from: "2026-01-01T00:20:00Z",
			want: []string{"2026-01-01T01:15:00Z", "2026-01-01T02:15:00Z"},
		},
		{
			name: "start in the future fires at start first",
			spec: Spec{Kind: KindInterval, TimeZone: "UTC", Every: 10 * time.Minute, Start: time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC)},
			from: "2025-12-31T00:00:00Z",
			want: []string{"2026-01-01T00:05:00Z", "2026-01-01T00:15:00Z", "2026-01-01T00:25:00Z"},
		},
		{
			name: "from exactly start",
			spec: Spec{Kind: KindInterval, TimeZone: "UTC", Every: 10 * time.Minute, Start: time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC)},
			from: "2026-01-01T00:05:00Z",
			want: []string{"2026-01-01T00:15:00Z"},
		},
		{
			name: "start with nanoseconds keeps its phase",
			spec: Spec{Kind: KindInterval, TimeZone: "UTC", Every: 7 * time.Second, Start: time.Date(2026, 1, 1, 0, 0, 0, 250_000_000, time.UTC)},
			from: "2026-01-01T00:00:10Z",
			want: []string{"2026-01-01T00:00:14.25Z", "2026-01-01T00:00:21.25Z"},
		},
		{
			// 24h is not "the same local time tomorrow": across Berlin's spring
			// forward 13:00 CET becomes 14:00 CEST.
			name: "absolute across DST",
			spec: Spec{Kind: KindInterval, TimeZone: "Europe/Berlin", Every: 24 * time.Hour, Start: time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC)},
			from: "2026-03-28T12:00:00Z",
			want: []string{"2026-03-29T12:00:00Z", "2026-03-30T12:00:00Z"},
		},
		{
			// @every across Berlin's fall-back: 02:00 CEST, 02:00 CET, 03:00 CET.
			name: "every hour across fall back",
			spec: cronSpec("@every 1h", "Europe/Berlin", skip, first),
			from: "2026-10-24T23:30:00Z",
			want: []string{"2026-10-25T00:00:00Z", "2026-10-25T01:00:00Z", "2026-10-25T02:00:00Z"},
		},
		{
			// 2500 is more than 292 years from the epoch: past what a
			// time.Duration holds, so the grid arithmetic must not overflow.
			name: "far future",
			spec: Spec{Kind: KindInterval, TimeZone: "UTC", Every: time.Hour},
			from: "2500-01-01T00:30:00Z",
			want: []string{"2500-01-01T01:00:00Z"},
		},
		{
			name: "before the epoch",
			spec: Spec{Kind: KindInterval, TimeZone: "UTC", Every: time.Hour, Offset: time.Minute},
			from: "1900-01-01T00:30:00Z",
			want: []string{"1900-01-01T01:01:00Z"},
		},
	})
}

func TestNextOneShots(t *testing.T) {
	t.Parallel()
	ref := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		spec Spec
		at   time.Time // the single fire time
	}{
		{"immediate fires at the reference", Spec{Kind: KindImmediate, TimeZone: "UTC", Reference: ref}, ref},
		{"at", Spec{Kind: KindAt, TimeZone: "Europe/Berlin", At: time.Date(2026, 3, 29, 3, 30, 0, 0, time.FixedZone("CEST", 7200))}, time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC)},
		{"delay counts from the reference", Spec{Kind: KindDelay, TimeZone: "UTC", Reference: ref, Delay: 90 * time.Second}, ref.Add(90 * time.Second)},
		{"delay is absolute across DST", Spec{Kind: KindDelay, TimeZone: "Europe/Berlin", Reference: time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC), Delay: time.Hour}, time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, tc.spec)
			next, ok := s.Next(tc.at.Add(-time.Nanosecond))
			require.True(t, ok)
			assert.True(t, next.Equal(tc.at), "got %s want %s", next, tc.at)
			_, ok = s.Next(tc.at)
			assert.False(t, ok, "a one-off is not after itself")
			assert.Equal(t, []string{utc([]time.Time{tc.at})[0]}, utc(Preview(s, tc.at.Add(-time.Hour), 5)), "fires once")
		})
	}
}
