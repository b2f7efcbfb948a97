package jobspec

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/schedule"
)

// A newcomer's definitions: no time zone, no DST policy.
func TestNewcomerDefinitionsAreValid(t *testing.T) {
	t.Parallel()
	accepted := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for name, s := range map[string]*sundialv1.Schedule{
		"interval": {Kind: &sundialv1.Schedule_Interval{Interval: &sundialv1.Interval{Every: durationpb.New(time.Minute)}}},
		"delay":    {Kind: &sundialv1.Schedule_Delay{Delay: &sundialv1.Delay{Duration: durationpb.New(time.Minute)}}},
		"cron":     {Kind: &sundialv1.Schedule_Cron{Cron: &sundialv1.Cron{Expression: "30 2 * * *"}}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			spec := &sundialv1.JobSpec{Id: "t.newcomer-" + name, OwnerTeam: "t", Schedule: s,
				Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "noop"}}}}
			assert.Empty(t, Validate(spec), "accepted without a time zone or DST policy")
			compiled, errs := CompileSchedule(s, accepted)
			require.Empty(t, errs)
			assert.Equal(t, "UTC", compiled.Spec().TimeZone)
			if name == "cron" {
				assert.Equal(t, schedule.NonexistentShiftForward, compiled.Spec().Nonexistent)
				assert.Equal(t, schedule.AmbiguousFirst, compiled.Spec().Ambiguous)
			}
			assert.Contains(t, ScheduleInForce(s), "time zone UTC (default)")
		})
	}
}

func TestScheduleInForce(t *testing.T) {
	t.Parallel()
	s := &sundialv1.Schedule{Kind: &sundialv1.Schedule_Cron{Cron: &sundialv1.Cron{Expression: "@daily"}}, TimeZone: "Europe/Berlin",
		Dst: &sundialv1.DstPolicy{Nonexistent: sundialv1.NonexistentTimePolicy_NONEXISTENT_TIME_POLICY_SKIP}}
	assert.Equal(t, "time zone Europe/Berlin; DST: nonexistent times skip, ambiguous times first (default)", ScheduleInForce(s))
	assert.Equal(t, "no schedule: it runs only when triggered", ScheduleInForce(nil))
}
