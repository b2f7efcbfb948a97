package schedule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefaultsNeedNoZone(t *testing.T) {
	t.Parallel()
	ref := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, spec := range []Spec{
		{Kind: KindInterval, Every: time.Minute},
		{Kind: KindAt, At: ref.Add(time.Hour)},
		{Kind: KindDelay, Delay: time.Minute, Reference: ref},
		{Kind: KindImmediate, Reference: ref},
		{Kind: KindCron, Cron: "0 * * * *"},
	} {
		t.Run(spec.Kind.String(), func(t *testing.T) {
			t.Parallel()
			s, err := Compile(spec)
			require.NoError(t, err)
			assert.Equal(t, DefaultTimeZone, s.Spec().TimeZone, "the spec in force names the zone")
			assert.Equal(t, time.UTC.String(), s.Location().String())
			_, ok := s.Next(ref.Add(-time.Second))
			assert.True(t, ok, "it fires")
		})
	}
}

func TestCronDefaultPolicies(t *testing.T) {
	t.Parallel()
	s, err := Compile(Spec{Kind: KindCron, Cron: "30 2 * * *", TimeZone: "Europe/Berlin"})
	require.NoError(t, err)
	assert.Equal(t, NonexistentShiftForward, s.Spec().Nonexistent, "the spec in force names the policy")
	assert.Equal(t, AmbiguousFirst, s.Spec().Ambiguous)

	// Spring forward, 2026-03-29: 02:30 does not exist in Berlin; it fires
	// at 03:30 CEST, 01:30 UTC.
	got := s.Between(time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC), time.Date(2026, 3, 30, 0, 0, 0, 0, time.UTC), 10)
	require.Len(t, got, 1, "shifted forward, not skipped: %v", got)
	assert.True(t, got[0].Equal(time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC)), "got %v", got[0].UTC())

	// Fall back, 2026-10-25: 02:30 happens twice; it fires once, at the
	// first, still on CEST (00:30 UTC).
	got = s.Between(time.Date(2026, 10, 24, 12, 0, 0, 0, time.UTC), time.Date(2026, 10, 26, 0, 0, 0, 0, time.UTC), 10)
	require.Len(t, got, 1, "once, not twice: %v", got)
	assert.True(t, got[0].Equal(time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC)), "got %v", got[0].UTC())
}

func TestExplicitSettingsWin(t *testing.T) {
	t.Parallel()
	spec := Spec{Kind: KindCron, Cron: "30 2 * * *", TimeZone: "Europe/Berlin", Nonexistent: NonexistentSkip, Ambiguous: AmbiguousBoth}
	s, err := Compile(spec)
	require.NoError(t, err)
	assert.Equal(t, spec, s.Spec())
	got := s.Between(time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC), time.Date(2026, 3, 30, 0, 0, 0, 0, time.UTC), 10)
	assert.Empty(t, got, "skip: no run on the day of the gap")
	got = s.Between(time.Date(2026, 10, 24, 12, 0, 0, 0, time.UTC), time.Date(2026, 10, 26, 0, 0, 0, 0, time.UTC), 10)
	assert.Len(t, got, 2, "both: two runs on the day of the repeat")

	iv, err := Compile(Spec{Kind: KindInterval, Every: time.Hour, TimeZone: "Asia/Tokyo"})
	require.NoError(t, err)
	assert.Equal(t, "Asia/Tokyo", iv.Spec().TimeZone)
}

func TestWithDefaultsLeavesOtherKindsPolicies(t *testing.T) {
	t.Parallel()
	// The DST policies mean nothing to the kinds that fire at absolute
	// instants, so no default is written into them.
	got := Spec{Kind: KindInterval, Every: time.Minute}.WithDefaults()
	assert.Equal(t, NonexistentUnspecified, got.Nonexistent)
	assert.Equal(t, AmbiguousUnspecified, got.Ambiguous)
	assert.Equal(t, "UTC", got.TimeZone)
}

func TestInForce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		given Spec
		want  string
	}{
		{Spec{Kind: KindCron}, "time zone UTC (default); DST: nonexistent times shift_forward (default), ambiguous times first (default)"},
		{Spec{Kind: KindCron, TimeZone: "Europe/Berlin", Ambiguous: AmbiguousBoth},
			"time zone Europe/Berlin; DST: nonexistent times shift_forward (default), ambiguous times both"},
		{Spec{Kind: KindCron, TimeZone: "UTC", Nonexistent: NonexistentSkip, Ambiguous: AmbiguousSecond},
			"time zone UTC; DST: nonexistent times skip, ambiguous times second"},
		{Spec{Kind: KindInterval}, "time zone UTC (default); DST: no effect (interval schedules fire at absolute instants)"},
		{Spec{Kind: KindAt, TimeZone: "Asia/Tokyo"}, "time zone Asia/Tokyo; DST: no effect (at schedules fire at absolute instants)"},
	} {
		assert.Equal(t, tc.want, InForce(tc.given))
	}
}
