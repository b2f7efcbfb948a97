package schedule

import (
	"fmt"
	"strings"
	"time"
)

// Kind says how a schedule names its fire times.
type Kind int

// The kinds of schedule. The zero value is not a kind: Compile rejects it, so
// a definition that forgot to say what it is never fires by accident.
const (
	KindUnspecified Kind = iota
	// KindImmediate fires once, at Spec.Reference.
	KindImmediate
	// KindAt fires once, at the instant Spec.At.
	KindAt
	// KindDelay fires once, Spec.Delay after Spec.Reference.
	KindDelay
	// KindCron fires at the local wall-clock times matched by Spec.Cron in
	// Spec.TimeZone, under the DST policies.
	KindCron
	// KindInterval fires every Spec.Every on an absolute grid anchored at
	// Spec.Start, or at the Unix epoch plus Spec.Offset.
	KindInterval
)

var kindNames = [...]string{
	KindUnspecified: "unspecified",
	KindImmediate:   "immediate",
	KindAt:          "at",
	KindDelay:       "delay",
	KindCron:        "cron",
	KindInterval:    "interval",
}

func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// ParseKind reads a kind by name ("immediate", "at", "delay", "cron",
// "interval"), ignoring case.
func ParseKind(s string) (Kind, error) {
	for k, name := range kindNames {
		if k != int(KindUnspecified) && strings.EqualFold(s, name) {
			return Kind(k), nil
		}
	}
	return KindUnspecified, fmt.Errorf("unknown schedule kind %q (want immediate, at, delay, cron or interval)", s)
}

// NonexistentPolicy says what a cron schedule does with a local time that
// does not exist because the clocks jump forward over it.
type NonexistentPolicy int

// The nonexistent-time policies. See the package documentation for examples.
const (
	NonexistentUnspecified NonexistentPolicy = iota
	// NonexistentSkip does not fire for a local time inside the gap.
	NonexistentSkip
	// NonexistentShiftForward fires at the local time moved forward by the
	// length of the gap: the instant the clock would have shown that time had
	// it not jumped (Berlin's 02:30 on a spring-forward day fires at 03:30
	// CEST, 01:30 UTC).
	NonexistentShiftForward
)

var nonexistentNames = [...]string{
	NonexistentUnspecified:  "unspecified",
	NonexistentSkip:         "skip",
	NonexistentShiftForward: "shift_forward",
}

func (p NonexistentPolicy) String() string {
	if p >= 0 && int(p) < len(nonexistentNames) {
		return nonexistentNames[p]
	}
	return fmt.Sprintf("NonexistentPolicy(%d)", int(p))
}

// ParseNonexistent reads a nonexistent-time policy: "skip", or
// "shift_forward" (also "shift" and "shift-forward"), ignoring case.
func ParseNonexistent(s string) (NonexistentPolicy, error) {
	switch strings.ToLower(s) {
	case "skip":
		return NonexistentSkip, nil
	case "shift", "shift_forward", "shift-forward":
		return NonexistentShiftForward, nil
	}
	return NonexistentUnspecified, fmt.Errorf("unknown nonexistent-time policy %q (want skip or shift_forward)", s)
}

// AmbiguousPolicy says what a cron schedule does with a local time that
// occurs twice because the clocks fall back over it.
type AmbiguousPolicy int

// The ambiguous-time policies. See the package documentation for examples.
const (
	AmbiguousUnspecified AmbiguousPolicy = iota
	// AmbiguousFirst fires at the first occurrence only (the earlier
	// instant, still on summer time).
	AmbiguousFirst
	// AmbiguousSecond fires at the second occurrence only (the later
	// instant, after the clocks fell back).
	AmbiguousSecond
	// AmbiguousBoth fires at both occurrences, in order.
	AmbiguousBoth
)

var ambiguousNames = [...]string{
	AmbiguousUnspecified: "unspecified",
	AmbiguousFirst:       "first",
	AmbiguousSecond:      "second",
	AmbiguousBoth:        "both",
}

func (p AmbiguousPolicy) String() string {
	if p >= 0 && int(p) < len(ambiguousNames) {
		return ambiguousNames[p]
	}
	return fmt.Sprintf("AmbiguousPolicy(%d)", int(p))
}

// ParseAmbiguous reads an ambiguous-time policy: "first", "second" or "both",
// ignoring case.
func ParseAmbiguous(s string) (AmbiguousPolicy, error) {
	for p, name := range ambiguousNames {
		if p != int(AmbiguousUnspecified) && strings.EqualFold(s, name) {
			return AmbiguousPolicy(p), nil
		}
	}
	return AmbiguousUnspecified, fmt.Errorf("unknown ambiguous-time policy %q (want first, second or both)", s)
}

// Spec is a schedule as a job definition states it. Each kind reads only its
// own fields; Compile rejects a field set for a kind that does not use it
// (TimeZone, the DST policies and Reference excepted, see below).
type Spec struct {
	// Kind selects which of the fields below name the fire times. Required.
	Kind Kind

	// Reference is the instant KindImmediate fires at and KindDelay counts
	// from: the moment the definition was accepted or the trigger arrived. It
	// is supplied by the caller (the registry, the trigger API), not written
	// by users, so it may be set for every kind; the other kinds ignore it.
	Reference time.Time

	// At is the instant of a KindAt schedule. It is an instant, not a wall
	// time, so no DST policy applies to it.
	At time.Time

	// Delay is how long after Reference a KindDelay schedule fires. Positive.
	Delay time.Duration

	// Cron is the expression of a KindCron schedule: 5 fields (minute hour
	// day-of-month month day-of-week), 6 fields (seconds first), a descriptor
	// (@yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly) or
	// "@every <duration>".
	Cron string

	// Every is the period of a KindInterval schedule: at least one second.
	Every time.Duration

	// Start anchors a KindInterval schedule: it fires at Start, Start+Every,
	// Start+2*Every, ... and never before Start. Optional.
	Start time.Time

	// Offset shifts a KindInterval schedule without Start: it fires at the
	// Unix epoch + Offset + k*Every for every integer k. 0 <= Offset < Every.
	Offset time.Duration

	// TimeZone is the IANA name of the zone the schedule is read in (for
	// example "Europe/Berlin", or "UTC"). Cron expressions are matched
	// against its wall clock, and previews print in it. Empty means
	// DefaultTimeZone. "Local" is refused because it would depend on the
	// machine.
	TimeZone string

	// Nonexistent and Ambiguous are the DST policies of KindCron;
	// unspecified means DefaultNonexistent and DefaultAmbiguous. The other
	// kinds fire at absolute instants, where they have no effect, so there
	// they may be left unspecified or set.
	Nonexistent NonexistentPolicy
	Ambiguous   AmbiguousPolicy
}

// The defaults of a schedule that does not state them. They are what a
// newcomer expects from other schedulers: a zone that does not depend on
// the machine, and cron's own behaviour at DST changes (Vixie cron, systemd
// timers and Quartz all run a job whose time was skipped right after the
// gap, and run a repeated time once).
const (
	// DefaultTimeZone is the zone of a schedule without one. UTC has no
	// DST, so a cron schedule in it has neither gaps nor repeated times.
	DefaultTimeZone = "UTC"
	// DefaultNonexistent: a local time the clocks jump over still fires,
	// at the instant the clock would have shown it (02:30 → 03:30), so a
	// daily job is never skipped for a day.
	DefaultNonexistent = NonexistentShiftForward
	// DefaultAmbiguous: a local time the clocks pass twice fires once, at
	// the first (earlier) instant, so a daily job never runs twice a day.
	DefaultAmbiguous = AmbiguousFirst
)

// WithDefaults returns the spec with the defaults filled in: DefaultTimeZone
// for an empty TimeZone, and for KindCron DefaultNonexistent and
// DefaultAmbiguous for unspecified policies. Compile applies it, so
// Schedule.Spec shows the settings in force. Explicit settings win.
func (s Spec) WithDefaults() Spec {
	if s.TimeZone == "" {
		s.TimeZone = DefaultTimeZone
	}
	if s.Kind == KindCron {
		if s.Nonexistent == NonexistentUnspecified {
			s.Nonexistent = DefaultNonexistent
		}
		if s.Ambiguous == AmbiguousUnspecified {
			s.Ambiguous = DefaultAmbiguous
		}
	}
	return s
}

// Field names used in FieldError, spelled like the JSON paths of the
// protobuf job definition so that an error points at what the user wrote.
const (
	FieldKind           = "schedule.kind"
	FieldReference      = "schedule.reference"
	FieldAt             = "schedule.at.time"
	FieldDelay          = "schedule.delay.duration"
	FieldCronExpression = "schedule.cron.expression"
	FieldIntervalEvery  = "schedule.interval.every"
	FieldIntervalStart  = "schedule.interval.start"
	FieldIntervalOffset = "schedule.interval.offset"
	FieldTimeZone       = "schedule.time_zone"
	FieldNonexistent    = "schedule.dst.nonexistent"
	FieldAmbiguous      = "schedule.dst.ambiguous"
)

// FieldError is one bad value of a Spec: which field, and why.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// InForce says which zone and DST policies a schedule given as given runs
// with, marking each setting that given left to its default, for example
// "time zone UTC (default); DST: nonexistent times shift_forward (default),
// ambiguous times first (default)". Only the kind, zone and policies of
// given are read.
func InForce(given Spec) string {
	eff := given.WithDefaults()
	mark := func(defaulted bool) string {
		if defaulted {
			return " (default)"
		}
		return ""
	}
	s := "time zone " + eff.TimeZone + mark(given.TimeZone == "")
	if given.Kind != KindCron {
		return s + "; DST: no effect (" + given.Kind.String() + " schedules fire at absolute instants)"
	}
	return s + "; DST: nonexistent times " + eff.Nonexistent.String() + mark(given.Nonexistent == NonexistentUnspecified) +
		", ambiguous times " + eff.Ambiguous.String() + mark(given.Ambiguous == AmbiguousUnspecified)
}
