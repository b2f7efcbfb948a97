package schedule_test

import (
	"fmt"
	"time"

	"github.com/sundialhq/sundial/schedule"
)

// On 2026-03-29 Berlin's clocks jump from 02:00 to 03:00, so 02:30 does not
// exist: shifted forward, it fires at 03:30 CEST.
func ExampleCompile_nonexistentShiftForward() {
	s, err := schedule.Compile(schedule.Spec{
		Kind:        schedule.KindCron,
		Cron:        "30 2 * * *",
		TimeZone:    "Europe/Berlin",
		Nonexistent: schedule.NonexistentShiftForward,
		Ambiguous:   schedule.AmbiguousFirst,
	})
	if err != nil {
		panic(err)
	}
	for _, t := range schedule.Preview(s, time.Date(2026, 3, 28, 0, 0, 0, 0, time.UTC), 3) {
		fmt.Println(t.Format(time.RFC3339), t.Format("MST"))
	}
	// Output:
	// 2026-03-28T02:30:00+01:00 CET
	// 2026-03-29T03:30:00+02:00 CEST
	// 2026-03-30T02:30:00+02:00 CEST
}

// On 2026-10-25 Berlin's clocks fall back from 03:00 to 02:00, so 02:30
// happens twice; AmbiguousBoth fires at each.
func ExampleSchedule_Next_ambiguousBoth() {
	s, err := schedule.Compile(schedule.Spec{
		Kind:        schedule.KindCron,
		Cron:        "30 2 * * *",
		TimeZone:    "Europe/Berlin",
		Nonexistent: schedule.NonexistentSkip,
		Ambiguous:   schedule.AmbiguousBoth,
	})
	if err != nil {
		panic(err)
	}
	t := time.Date(2026, 10, 24, 12, 0, 0, 0, time.UTC)
	for range 3 {
		t, _ = s.Next(t)
		fmt.Println(t.Format(time.RFC3339), t.UTC().Format(time.TimeOnly))
	}
	// Output:
	// 2026-10-25T02:30:00+02:00 00:30:00
	// 2026-10-25T02:30:00+01:00 01:30:00
	// 2026-10-26T02:30:00+01:00 01:30:00
}

// A bad spec reports every field at fault.
func ExampleCompile_errors() {
	_, err := schedule.Compile(schedule.Spec{
		Kind:     schedule.KindCron,
		Cron:     "0 0 30 2 *",
		TimeZone: "Europe/Berlim",
	})
	for _, fe := range schedule.FieldErrors(err) {
		fmt.Println(fe)
	}
	// Output:
	// schedule.time_zone: unknown time zone "Europe/Berlim"
	// schedule.cron.expression: never fires: no month of the expression has the day of month it names
}

// An interval counts absolute time on a fixed grid: every 90 minutes from
// the Unix epoch, offset by 15 minutes.
func ExampleSchedule_Between_interval() {
	s, err := schedule.Compile(schedule.Spec{
		Kind:     schedule.KindInterval,
		Every:    90 * time.Minute,
		Offset:   15 * time.Minute,
		TimeZone: "UTC",
	})
	if err != nil {
		panic(err)
	}
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, t := range s.Between(from, from.Add(4*time.Hour), 10) {
		fmt.Println(t.Format(time.Kitchen))
	}
	// Output:
	// 12:15AM
	// 1:45AM
	// 3:15AM
}
