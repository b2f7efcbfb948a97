package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// minEvery is the shortest period of an interval or @every schedule. Run ids
// carry the due time in milliseconds and the dispatcher is not a sub-second
// ticker, so anything shorter is a mistake rather than a schedule.
const minEvery = time.Second

// Compile checks a Spec and returns the schedule it describes. Every bad value
// is reported, each as a *FieldError naming the field and the reason; the
// returned error joins them (errors.As finds the first, FieldErrors lists
// them all). Compile is pure: it reads no clock and loads only the zone
// database.
func Compile(spec Spec) (*Schedule, error) {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	unused := func(field string, set bool) {
		if set {
			bad(field, "not used by a schedule of kind %s", spec.Kind)
		}
	}

	spec = spec.WithDefaults()
	loc, zoneErr := loadZone(spec.TimeZone)
	if zoneErr != "" {
		bad(FieldTimeZone, "%s", zoneErr)
	}
	if spec.Nonexistent < NonexistentUnspecified || spec.Nonexistent > NonexistentShiftForward {
		bad(FieldNonexistent, "unknown policy %d", int(spec.Nonexistent))
	}
	if spec.Ambiguous < AmbiguousUnspecified || spec.Ambiguous > AmbiguousBoth {
		bad(FieldAmbiguous, "unknown policy %d", int(spec.Ambiguous))
	}

	var calc calculator
	switch spec.Kind {
	case KindImmediate, KindAt, KindDelay:
		unused(FieldCronExpression, spec.Cron != "")
		unused(FieldIntervalEvery, spec.Every != 0)
		unused(FieldIntervalStart, !spec.Start.IsZero())
		unused(FieldIntervalOffset, spec.Offset != 0)
		unused(FieldAt, spec.Kind != KindAt && !spec.At.IsZero())
		unused(FieldDelay, spec.Kind != KindDelay && spec.Delay != 0)
		switch spec.Kind {
		case KindImmediate:
			if spec.Reference.IsZero() {
				bad(FieldReference, "required: an immediate schedule fires at its reference time")
			}
			calc = oneShot{at: spec.Reference}
		case KindAt:
			if spec.At.IsZero() {
				bad(FieldAt, "required")
			}
			calc = oneShot{at: spec.At}
		case KindDelay:
			if spec.Reference.IsZero() {
				bad(FieldReference, "required: a delay counts from the reference time")
			}
			if spec.Delay <= 0 {
				bad(FieldDelay, "must be positive, got %s (use kind immediate to fire at once)", spec.Delay)
			}
			calc = oneShot{at: spec.Reference.Add(spec.Delay)}
		}

	case KindCron:
		unused(FieldAt, !spec.At.IsZero())
		unused(FieldDelay, spec.Delay != 0)
		unused(FieldIntervalEvery, spec.Every != 0)
		unused(FieldIntervalStart, !spec.Start.IsZero())
		unused(FieldIntervalOffset, spec.Offset != 0)
		c, reason := parseCron(spec.Cron)
		if reason != "" {
			bad(FieldCronExpression, "%s", reason)
		}
		calc = c

	case KindInterval:
		unused(FieldAt, !spec.At.IsZero())
		unused(FieldDelay, spec.Delay != 0)
		unused(FieldCronExpression, spec.Cron != "")
		if spec.Every < minEvery {
			bad(FieldIntervalEvery, "must be at least %s, got %s", minEvery, spec.Every)
		}
		if spec.Offset < 0 || (spec.Every > 0 && spec.Offset >= spec.Every) {
			bad(FieldIntervalOffset, "must be at least 0 and less than every (%s), got %s", spec.Every, spec.Offset)
		}
		if !spec.Start.IsZero() && spec.Offset != 0 {
			bad(FieldIntervalOffset, "set start or offset, not both: start already fixes the phase")
		}
		calc = newInterval(spec.Every, spec.Start, spec.Offset)

	default:
		bad(FieldKind, "required: one of immediate, at, delay, cron, interval (got %s)", spec.Kind)
	}

	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &Schedule{spec: spec, loc: loc, calc: calc}, nil
}

// FieldErrors lists every *FieldError in err, in order. It returns nil when
// err carries none.
func FieldErrors(err error) []*FieldError {
	var out []*FieldError
	var walk func(error)
	walk = func(err error) {
		// The walk visits every node of the tree itself, so each node is
		// looked at directly rather than through errors.As.
		if fe, ok := err.(*FieldError); ok { //nolint:errorlint // see above
			out = append(out, fe)
			return
		}
		switch u := err.(type) { //nolint:errorlint // the walk unwraps one level at a time
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			if e := u.Unwrap(); e != nil {
				walk(e)
			}
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}

// loadZone resolves an IANA zone name, or says why it cannot.
func loadZone(name string) (*time.Location, string) {
	if name == "Local" {
		return nil, `"Local" depends on the machine; name the IANA zone instead`
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Sprintf("unknown time zone %q", name)
	}
	return loc, ""
}

// parseCron turns an expression into a calculator, or says why it cannot.
func parseCron(expr string) (_ calculator, reason string) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return nil, "required"
	}
	// The zone belongs in schedule.time_zone, where the DST policies apply to
	// it; other cron dialects accept it as a prefix, so say where it goes.
	if upper := strings.ToUpper(expr); strings.HasPrefix(upper, "TZ=") || strings.HasPrefix(upper, "CRON_TZ=") {
		return nil, "a time zone prefix is not accepted in the expression; set " + FieldTimeZone
	}
	if fields := strings.Fields(expr); fields[0] == "@every" {
		if len(fields) != 2 {
			return nil, `"@every" takes one duration, for example "@every 90m"`
		}
		d, err := time.ParseDuration(fields[1])
		if err != nil {
			return nil, fmt.Sprintf("@every: %v", err)
		}
		if d < minEvery {
			return nil, fmt.Sprintf("@every must be at least %s, got %s", minEvery, d)
		}
		return newInterval(d, time.Time{}, 0), ""
	}

	c, err := parseCronFields(expr)
	if err != nil {
		return nil, err.Error()
	}
	if !c.canFire() {
		return nil, "never fires: no month of the expression has the day of month it names"
	}
	return c, ""
}
