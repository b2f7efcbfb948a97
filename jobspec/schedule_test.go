package jobspec_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

func TestFirstDue(t *testing.T) {
	t.Parallel()
	accepted := time.Date(2026, 3, 28, 10, 15, 2, 120e6, time.UTC)
	const (
		once = sundialv1.MisfirePolicy_MISFIRE_POLICY_FIRE_ONCE
		all  = sundialv1.MisfirePolicy_MISFIRE_POLICY_FIRE_ALL
		skip = sundialv1.MisfirePolicy_MISFIRE_POLICY_SKIP
	)
	dst := &sundialv1.DstPolicy{
		Nonexistent: sundialv1.NonexistentTimePolicy_NONEXISTENT_TIME_POLICY_SHIFT_FORWARD,
		Ambiguous:   sundialv1.AmbiguousTimePolicy_AMBIGUOUS_TIME_POLICY_FIRST,
	}
	cron := func(expr, zone string, p sundialv1.MisfirePolicy) *sundialv1.Schedule {
		return &sundialv1.Schedule{Kind: &sundialv1.Schedule_Cron{Cron: &sundialv1.Cron{Expression: expr}}, TimeZone: zone, Dst: dst, MisfirePolicy: p}
	}
	at := func(t time.Time, p sundialv1.MisfirePolicy) *sundialv1.Schedule {
		return &sundialv1.Schedule{Kind: &sundialv1.Schedule_At{At: &sundialv1.At{Time: timestamppb.New(t)}}, TimeZone: "UTC", MisfirePolicy: p}
	}
	everyMinute := func(p sundialv1.MisfirePolicy) *sundialv1.Schedule {
		return &sundialv1.Schedule{
			Kind:     &sundialv1.Schedule_Interval{Interval: &sundialv1.Interval{Every: durationpb.New(time.Minute)}},
			TimeZone: "UTC", MisfirePolicy: p,
		}
	}
	late := accepted.Add(3 * time.Hour).Add(30 * time.Second) // the registry reads the record 3h late; window 1h

	cases := []struct {
		name     string
		schedule *sundialv1.Schedule
		now      time.Time
		want     time.Time // zero: nothing scheduled
	}{
		// The documented example: 02:30 Berlin does not exist on 29 March,
		// SHIFT_FORWARD fires at 03:30 CEST.
		{"cron across spring forward", cron("30 2 * * *", "Europe/Berlin", once), accepted.Add(time.Second), time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC)},
		{"immediate", &sundialv1.Schedule{Kind: &sundialv1.Schedule_Immediate{Immediate: &sundialv1.Immediate{}}, TimeZone: "UTC"}, accepted.Add(time.Second), accepted},
		{"delay counts from the record", &sundialv1.Schedule{
			Kind: &sundialv1.Schedule_Delay{Delay: &sundialv1.Delay{Duration: durationpb.New(15 * time.Minute)}}, TimeZone: "UTC",
		}, accepted.Add(time.Minute), accepted.Add(15 * time.Minute)},
		{"at in the future", at(accepted.Add(time.Hour), skip), accepted, accepted.Add(time.Hour)},
		{"past at, fire once", at(accepted.Add(-time.Minute), once), accepted, accepted.Add(-time.Minute)},
		{"past at, skip", at(accepted.Add(-time.Minute), skip), accepted, time.Time{}},
		{"past at beyond the window", at(accepted.Add(-2*time.Hour), once), accepted, time.Time{}},
		{"interval at acceptance fires at it", everyMinute(once), accepted, accepted.Truncate(time.Minute).Add(time.Minute)},
		{"immediate read too late", &sundialv1.Schedule{Kind: &sundialv1.Schedule_Immediate{Immediate: &sundialv1.Immediate{}}, TimeZone: "UTC"}, late, time.Time{}},
		{"late, skip", everyMinute(skip), late, late.Truncate(time.Minute).Add(time.Minute)},
		{"late, fire all", everyMinute(all), late, late.Add(-time.Hour).Truncate(time.Minute).Add(time.Minute)},
		{"late, fire once", everyMinute(once), late, late.Truncate(time.Minute)},
		{"late daily cron, fire once, nothing in the window", cron("0 3 * * *", "UTC", once), late, time.Date(2026, 3, 29, 3, 0, 0, 0, time.UTC)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, errs := jobspec.CompileSchedule(c.schedule, accepted)
			require.Empty(t, errs)
			got, ok := jobspec.FirstDue(s, jobspec.MisfirePolicy(c.schedule), jobspec.CatchUpWindow(c.schedule), accepted, c.now)
			if c.want.IsZero() {
				assert.False(t, ok, "scheduled %s", got)
				return
			}
			require.True(t, ok)
			assert.Equal(t, c.want, got.UTC())
		})
	}
	_, ok := jobspec.FirstDue(nil, once, time.Hour, accepted, accepted)
	assert.False(t, ok)
}

func TestScheduleDefaults(t *testing.T) {
	t.Parallel()
	assert.Equal(t, sundialv1.MisfirePolicy_MISFIRE_POLICY_FIRE_ONCE, jobspec.MisfirePolicy(nil))
	assert.Equal(t, time.Hour, jobspec.CatchUpWindow(nil))
	assert.Equal(t, 6*time.Hour, jobspec.CatchUpWindow(&sundialv1.Schedule{CatchUpWindow: durationpb.New(6 * time.Hour)}))
}

// TestNextDue: the next due time is the first occurrence after now in the
// job's zone, not the definition's first occurrence.
func TestNextDue(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	accepted := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	now := time.Date(2026, 11, 28, 21, 40, 0, 0, time.UTC)
	cron := func(expr, zone string) *sundialv1.Schedule {
		return &sundialv1.Schedule{Kind: &sundialv1.Schedule_Cron{Cron: &sundialv1.Cron{Expression: expr}}, TimeZone: zone}
	}
	job := func(s *sundialv1.Schedule, paused bool) *sundialv1.JobSpec {
		return &sundialv1.JobSpec{Id: "t.j", OwnerTeam: "t", Schedule: s, Paused: paused}
	}
	tests := []struct {
		name   string
		spec   *sundialv1.JobSpec
		want   time.Time
		wantOK bool
	}{
		{"cron in its zone", job(cron("30 2 * * *", "Europe/Berlin"), false), time.Date(2026, 11, 29, 2, 30, 0, 0, berlin), true},
		{"cron due exactly now is past", job(cron("40 21 * * *", "UTC"), false), time.Date(2026, 11, 29, 21, 40, 0, 0, time.UTC), true},
		{"interval", job(&sundialv1.Schedule{Kind: &sundialv1.Schedule_Interval{Interval: &sundialv1.Interval{Every: durationpb.New(time.Hour)}}, TimeZone: "UTC"}, false), time.Date(2026, 11, 28, 22, 0, 0, 0, time.UTC), true},
		{"one-off in the future", job(&sundialv1.Schedule{Kind: &sundialv1.Schedule_At{At: &sundialv1.At{Time: timestamppb.New(now.Add(time.Hour))}}, TimeZone: "UTC"}, false), now.Add(time.Hour), true},
		{"one-off in the past", job(&sundialv1.Schedule{Kind: &sundialv1.Schedule_Delay{Delay: &sundialv1.Delay{Duration: durationpb.New(time.Minute)}}, TimeZone: "UTC"}, false), time.Time{}, false},
		{"paused", job(cron("30 2 * * *", "UTC"), true), time.Time{}, false},
		{"trigger only", job(nil, false), time.Time{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := jobspec.NextDue(tc.spec, accepted, now)
			require.Equal(t, tc.wantOK, ok)
			assert.True(t, tc.want.Equal(got), "got %s, want %s", got, tc.want)
			if ok {
				assert.Equal(t, tc.want.Location().String(), got.Location().String())
			}
		})
	}
}
