package jobspec

import (
	"time"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/schedule"
)

// CompileSchedule turns the schedule of a job definition into a computable
// schedule. accepted is the instant the definition was accepted (the
// timestamp of its record on sundial.jobs): immediate schedules fire at it and
// delays count from it. Every bad value is reported as a FieldError whose
// field is the path in the JobSpec ("schedule.cron.expression").
//
// The dispatcher compiles stored definitions with the same function, so both
// read a schedule the same way.
func CompileSchedule(s *sundialv1.Schedule, accepted time.Time) (*schedule.Schedule, []FieldError) {
	return compileSchedule(s, accepted)
}

func compileSchedule(s *sundialv1.Schedule, accepted time.Time) (*schedule.Schedule, []FieldError) {
	v := &validator{}
	spec := schedule.Spec{Reference: accepted, TimeZone: s.GetTimeZone()}

	switch k := s.GetKind().(type) {
	case *sundialv1.Schedule_Immediate:
		spec.Kind = schedule.KindImmediate
	case *sundialv1.Schedule_At:
		spec.Kind = schedule.KindAt
		if ts := k.At.GetTime(); ts == nil {
			v.add(schedule.FieldAt, "required: the instant to fire at")
		} else if t, reason := checkTimestamp(ts); reason != "" {
			v.add(schedule.FieldAt, "%s", reason)
		} else if t.Before(time.Unix(0, 0)) {
			// Run ids carry the due time in milliseconds since 1970; the
			// zero time (0001-01-01) would read as "required" downstream.
			v.add(schedule.FieldAt, "%s is before 1970-01-01: run ids count milliseconds from 1970", t.Format(time.RFC3339))
		} else {
			spec.At = t
		}
	case *sundialv1.Schedule_Delay:
		spec.Kind = schedule.KindDelay
		if d := k.Delay.GetDuration(); d == nil {
			v.add(schedule.FieldDelay, "required: how long after the definition's record to fire")
		} else if got, ok := v.duration(schedule.FieldDelay, d, time.Millisecond, maxDelay); ok {
			spec.Delay = got
		}
	case *sundialv1.Schedule_Cron:
		spec.Kind = schedule.KindCron
		spec.Cron = k.Cron.GetExpression()
	case *sundialv1.Schedule_Interval:
		spec.Kind = schedule.KindInterval
		iv := k.Interval
		if d := iv.GetEvery(); d == nil {
			v.add(schedule.FieldIntervalEvery, "required: the period, at least 1s")
		} else if got, ok := v.duration(schedule.FieldIntervalEvery, d, time.Second, maxEvery); ok {
			spec.Every = got
		}
		switch a := iv.GetAnchor().(type) {
		case *sundialv1.Interval_Offset:
			if a.Offset == nil {
				break
			}
			// Zero is a valid offset, so this does not go through v.duration.
			if err := a.Offset.CheckValid(); err != nil {
				v.add(schedule.FieldIntervalOffset, "invalid duration: %v", err)
			} else if got := a.Offset.AsDuration(); got%time.Millisecond != 0 {
				v.add(schedule.FieldIntervalOffset, "%s: must be whole milliseconds", got)
			} else if spec.Every > 0 || got < 0 {
				// The schedule package checks 0 <= offset < every; without
				// a valid every only the sign can be checked.
				spec.Offset = got
			}
		case *sundialv1.Interval_Start:
			if a.Start == nil {
				v.add(schedule.FieldIntervalStart, "set but empty")
			} else if t, reason := checkTimestamp(a.Start); reason != "" {
				v.add(schedule.FieldIntervalStart, "%s", reason)
			} else {
				spec.Start = t
			}
		}
	default:
		// Leave spec.Kind unspecified: Compile names schedule.kind.
	}

	if dst := s.GetDst(); dst != nil {
		spec.Nonexistent = nonexistentPolicy(dst.GetNonexistent())
		spec.Ambiguous = ambiguousPolicy(dst.GetAmbiguous())
	}
	if p := s.GetMisfirePolicy(); !definedEnum(sundialv1.MisfirePolicy_name, int32(p)) {
		v.add("schedule.misfire_policy", "unknown policy %d: want MISFIRE_POLICY_FIRE_ONCE, MISFIRE_POLICY_FIRE_ALL or MISFIRE_POLICY_SKIP", int32(p))
	}
	if d := s.GetCatchUpWindow(); d != nil {
		v.duration("schedule.catch_up_window", d, time.Millisecond, MaxCatchUpWindow)
	}

	compiled, err := schedule.Compile(spec)
	for _, fe := range schedule.FieldErrors(err) {
		if v.has(fe.Field) {
			continue // already said why, more precisely
		}
		v.add(fe.Field, "%s", fe.Reason)
	}
	if len(v.errs) > 0 {
		return nil, sortByField(v.errs)
	}
	return compiled, nil
}

// Bounds of schedule durations beyond the schedule package's own rules: a
// delay or period longer than a century is a unit mistake.
const (
	maxDelay = 100 * 365 * 24 * time.Hour
	maxEvery = 100 * 365 * 24 * time.Hour
)

func (v *validator) has(field string) bool {
	for _, e := range v.errs {
		if e.Field == field {
			return true
		}
	}
	return false
}

// scheduleFieldOrder orders schedule errors the way the fields appear in a
// definition, so a report reads top to bottom.
var scheduleFieldOrder = []string{
	schedule.FieldKind, schedule.FieldAt, schedule.FieldDelay, schedule.FieldCronExpression,
	schedule.FieldIntervalEvery, schedule.FieldIntervalOffset, schedule.FieldIntervalStart,
	schedule.FieldTimeZone, schedule.FieldNonexistent, schedule.FieldAmbiguous,
	"schedule.misfire_policy", "schedule.catch_up_window",
}

func sortByField(errs []FieldError) []FieldError {
	rank := func(f string) int {
		for i, name := range scheduleFieldOrder {
			if name == f {
				return i
			}
		}
		return len(scheduleFieldOrder)
	}
	out := make([]FieldError, 0, len(errs))
	for r := 0; r <= len(scheduleFieldOrder); r++ {
		for _, e := range errs {
			if rank(e.Field) == r {
				out = append(out, e)
			}
		}
	}
	return out
}

// ScheduleInForce says which zone and DST policies the schedule runs with,
// marking the defaults (schedule.InForce); "no schedule" for a job that
// only runs when triggered.
func ScheduleInForce(s *sundialv1.Schedule) string {
	given := schedule.Spec{TimeZone: s.GetTimeZone(), Nonexistent: nonexistentPolicy(s.GetDst().GetNonexistent()),
		Ambiguous: ambiguousPolicy(s.GetDst().GetAmbiguous())}
	switch s.GetKind().(type) {
	case *sundialv1.Schedule_Immediate:
		given.Kind = schedule.KindImmediate
	case *sundialv1.Schedule_At:
		given.Kind = schedule.KindAt
	case *sundialv1.Schedule_Delay:
		given.Kind = schedule.KindDelay
	case *sundialv1.Schedule_Cron:
		given.Kind = schedule.KindCron
	case *sundialv1.Schedule_Interval:
		given.Kind = schedule.KindInterval
	default:
		return "no schedule: it runs only when triggered"
	}
	return schedule.InForce(given)
}

func nonexistentPolicy(p sundialv1.NonexistentTimePolicy) schedule.NonexistentPolicy {
	switch p {
	case sundialv1.NonexistentTimePolicy_NONEXISTENT_TIME_POLICY_UNSPECIFIED:
		return schedule.NonexistentUnspecified
	case sundialv1.NonexistentTimePolicy_NONEXISTENT_TIME_POLICY_SKIP:
		return schedule.NonexistentSkip
	case sundialv1.NonexistentTimePolicy_NONEXISTENT_TIME_POLICY_SHIFT_FORWARD:
		return schedule.NonexistentShiftForward
	}
	return schedule.NonexistentPolicy(-1) // Compile reports the unknown value
}

func ambiguousPolicy(p sundialv1.AmbiguousTimePolicy) schedule.AmbiguousPolicy {
	switch p {
	case sundialv1.AmbiguousTimePolicy_AMBIGUOUS_TIME_POLICY_UNSPECIFIED:
		return schedule.AmbiguousUnspecified
	case sundialv1.AmbiguousTimePolicy_AMBIGUOUS_TIME_POLICY_FIRST:
		return schedule.AmbiguousFirst
	case sundialv1.AmbiguousTimePolicy_AMBIGUOUS_TIME_POLICY_SECOND:
		return schedule.AmbiguousSecond
	case sundialv1.AmbiguousTimePolicy_AMBIGUOUS_TIME_POLICY_BOTH:
		return schedule.AmbiguousBoth
	}
	return schedule.AmbiguousPolicy(-1)
}

// MisfirePolicy returns the schedule's misfire policy with the default
// applied.
func MisfirePolicy(s *sundialv1.Schedule) sundialv1.MisfirePolicy {
	if p := s.GetMisfirePolicy(); p != sundialv1.MisfirePolicy_MISFIRE_POLICY_UNSPECIFIED {
		return p
	}
	return sundialv1.MisfirePolicy_MISFIRE_POLICY_FIRE_ONCE
}

// CatchUpWindow returns the schedule's catch-up window with the default
// applied.
func CatchUpWindow(s *sundialv1.Schedule) time.Duration {
	if d := s.GetCatchUpWindow(); d != nil && d.AsDuration() > 0 {
		return d.AsDuration()
	}
	return DefaultCatchUpWindow
}

// FirstDue returns the first due time a definition schedules, or false when
// it schedules nothing. accepted is the timestamp of the definition's record
// and now the registry's clock. It is pure.
//
// The first occurrence is computed from accepted, not from now, so the same
// record always yields the same due time and run id while the registry keeps
// up:
//
//   - immediate fires at accepted, delay at accepted + delay, at at its
//     instant;
//   - cron and interval fire first at their first occurrence at or after
//     accepted (occurrences before the definition existed are not misfires);
//   - an "at" instant already before accepted is a misfire at acceptance:
//     MISFIRE_POLICY_SKIP schedules nothing, the other policies fire it
//     (if it is inside the catch-up window);
//   - a paused job, or one without a schedule, schedules nothing.
//
// When the registry reads the record so late (a backlog, a rebuild of the
// store from sundial.jobs) that this occurrence is older than now minus the
// catch-up window, the misfire rule (CatchUp) decides from that occurrence
// on: a one-off schedules nothing; a recurring schedule starts at the first
// occurrence its policy fires (FIRE_ALL: the first inside the window, the
// dispatcher fires the rest in order; FIRE_ONCE: the latest inside the
// window; SKIP: none), or else at the next occurrence after now.
func FirstDue(s *schedule.Schedule, policy sundialv1.MisfirePolicy, window time.Duration, accepted, now time.Time) (time.Time, bool) {
	if s == nil {
		return time.Time{}, false
	}
	var (
		t  time.Time
		ok bool
	)
	switch s.Kind() {
	case schedule.KindImmediate, schedule.KindDelay, schedule.KindAt:
		t, ok = s.Next(time.Time{})
		if ok && s.Kind() == schedule.KindAt && t.Before(accepted) && policy == sundialv1.MisfirePolicy_MISFIRE_POLICY_SKIP {
			return time.Time{}, false
		}
	default:
		t, ok = s.Next(accepted.Add(-time.Nanosecond))
	}
	if !ok || !t.Before(now.Add(-window)) {
		return t, ok
	}
	// Only the first occurrence to fire matters here: a FIRE_ALL limit of
	// one finds it without reading the others.
	plan := CatchUp(s, policy, window, t, now, 1)
	if len(plan.Fire) > 0 {
		return plan.Fire[0], true
	}
	return plan.Next, !plan.Next.IsZero()
}

// NextDue returns a job's next due time: the first occurrence of its
// schedule after now, in the schedule's time zone (the returned instant
// carries it, for printing). accepted is when the definition was accepted
// (its record's timestamp), the reference of immediate and delay schedules.
// A paused job, one without a schedule or with one that does not compile,
// and a one-off whose occurrence is not after now have none (false). An
// occurrence already due and not yet run is pending, not next: the store's
// run records say when it is.
func NextDue(spec *sundialv1.JobSpec, accepted, now time.Time) (time.Time, bool) {
	s := spec.GetSchedule()
	if s == nil || spec.GetPaused() {
		return time.Time{}, false
	}
	sched, errs := compileSchedule(s, accepted)
	if len(errs) > 0 {
		return time.Time{}, false
	}
	return sched.Next(now)
}
