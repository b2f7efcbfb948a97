// Package schedule turns a job's schedule (immediate, at an instant, after a
// delay, cron, fixed interval) into fire times. It is a pure core: no I/O, no
// clock, no goroutines. Every computation takes the reference instant as an
// argument, so the registry, the dispatcher's catch-up and the preview
// command get the same answer for the same input, on any machine.
//
// # Use
//
//	s, err := schedule.Compile(schedule.Spec{
//		Kind:        schedule.KindCron,
//		Cron:        "30 2 * * *",
//		TimeZone:    "Europe/Berlin",
//		Nonexistent: schedule.NonexistentShiftForward,
//		Ambiguous:   schedule.AmbiguousFirst,
//	})
//	next, ok := s.Next(after)               // first fire time > after
//	next, err := s.NextFireTime(after)      // the same, with the reason when there is none
//	missed := s.Between(watermark, now, 100) // watermark < t <= now
//	soon := schedule.Preview(s, now, 10)
//	soon, err = schedule.PreviewContext(ctx, s, now, 10) // stops when ctx is done
//
// Compile reports every bad value at once, each as a *FieldError whose Field
// is the JSON path of the value in the job definition ("schedule.time_zone",
// "schedule.cron.expression", "schedule.interval.every", ...) and whose
// Reason says what is wrong. Fields that the kind does not read are refused
// rather than ignored.
//
// # Invariants
//
//   - Pure: Compile, Next, Between and Preview read no clock and no state
//     other than the immutable Schedule; a Schedule is safe for concurrent
//     use.
//   - Strictly after: Next(after) returns an instant strictly after after,
//     or false. Iterating t = Next(t) yields strictly increasing instants; no
//     instant is returned twice even where two wall times map to it (see
//     NonexistentShiftForward below).
//   - Complete: Next never skips a fire time. Between(from, to, n) returns
//     exactly the first n fire times in (from, to].
//   - Bounded: a cron search looks at most ten years past after (the longest
//     gap of an expression that fires at all is eight years: the 29th of
//     February around 2100) and walks at most a fixed number of zone offset
//     spans, so every call ends, for any expression, zone and year; when the
//     zone database cannot be stepped through, NextFireTime returns a
//     *SearchError instead of spinning. Compile refuses expressions that can
//     never match a calendar day, such as "0 0 30 2 *".
//   - Zone databases: the search works alike with the host's zone files and
//     with the database compiled in by time/tzdata (answers differ only where
//     the two carry different rules). Past a zone's last
//     explicit transition (2037 in the host's files, decades earlier in the
//     compiled-in ones) the standard library derives offsets from the zone's
//     rule string, and its Time.ZoneBounds can then report an end before the
//     instant asked about (on the last day of a leap year). The search uses
//     ZoneBounds only where it makes progress and otherwise finds the next
//     offset change by sampling the offset hourly and bisecting.
//   - Returned instants carry the schedule's *time.Location, for printing;
//     compare them with Equal.
//
// # Kinds
//
//   - Immediate fires once at Spec.Reference, the instant the definition or
//     trigger was accepted (supplied by the caller, never read from a clock).
//   - At fires once at the instant Spec.At.
//   - Delay fires once at Spec.Reference + Spec.Delay.
//   - Cron fires at the wall-clock times matched by the expression in the
//     schedule's time zone. Five fields (minute hour day-of-month month
//     day-of-week) or six (seconds first); the descriptors @yearly (or
//     @annually), @monthly, @weekly, @daily (or @midnight) and @hourly; and
//     "@every <duration>", which is exactly an interval with that period and
//     no start or offset. See "Cron syntax" below.
//   - Interval fires every Spec.Every (at least 1s) on a fixed grid: Start,
//     Start+Every, ... when Start is set (never before Start); otherwise
//     epoch + Offset + k*Every for every integer k, so "every 1h, offset
//     15m" fires at every quarter past the hour UTC, whatever the moment the
//     job was created or the process restarted.
//
// Immediate, at, delay, interval and @every count absolute time: a DST change
// neither moves nor repeats them. "@every 1h" across Berlin's fall-back night
// fires at 00:00, 01:00, 02:00 UTC, which the wall clock shows as 02:00 CEST,
// 02:00 CET, 03:00 CET.
//
// # Day of month and day of week
//
// Classic Vixie cron semantics: when both fields are restricted, a day that
// matches either one fires ("0 0 13 * 5" fires on every 13th and on every
// Friday); when one of them is unrestricted, only the other one constrains.
// A field is unrestricted when it is written "*" or "?" (or "*/1"); "*/2" is
// a restriction.
//
// # Time zones and DST
//
// Every schedule is read in an IANA zone (time.LoadLocation); one that
// names none is in DefaultTimeZone, UTC, never the machine's zone. A cron
// expression is matched against the zone's wall clock, and two wall-clock
// situations need a policy. A cron schedule that states none gets the one
// most schedulers have, DefaultNonexistent (shift forward) and
// DefaultAmbiguous (first); Compile fills the defaults in (Spec.WithDefaults)
// so that Schedule.Spec and InForce say what is in force:
//
// A nonexistent local time lies in the gap when clocks jump forward. In
// Europe/Berlin on 2026-03-29 the clocks go from 02:00 CET (+01:00) straight
// to 03:00 CEST (+02:00), so 02:30 does not exist that day:
//
//   - NonexistentSkip: "30 2 * * *" does not fire on 2026-03-29; it fires
//     on the 28th at 02:30 CET (01:30 UTC) and on the 30th at 02:30 CEST
//     (00:30 UTC).
//   - NonexistentShiftForward: it fires at 03:30 CEST (01:30 UTC) on the
//     29th: the wall time moved forward by the length of the gap, which is
//     the instant the clock would have shown 02:30 had it not jumped (the
//     rule of RFC 5545 and java.time). Two wall times can then name the same
//     instant ("30 2,3 * * *" matches 02:30, shifted to 03:30, and 03:30
//     itself): it fires once.
//
// An ambiguous local time occurs twice when clocks fall back. In
// Europe/Berlin on 2026-10-25 the clocks go from 03:00 CEST back to 02:00
// CET, so 02:30 occurs at 00:30 UTC (CEST) and again at 01:30 UTC (CET):
//
//   - AmbiguousFirst: "30 2 * * *" fires at 02:30 CEST (00:30 UTC) only.
//   - AmbiguousSecond: it fires at 02:30 CET (01:30 UTC) only.
//   - AmbiguousBoth: it fires at both, as two successive results of Next.
//
// Other zones follow the same rules with their own sizes: America/New_York
// repeats 01:00-01:59 on 2026-11-01, Australia/Lord_Howe moves by 30 minutes
// (02:00-02:29 does not exist on 2026-10-04, 01:30-01:59 repeats on
// 2026-04-05), and zones without DST such as Asia/Kathmandu (+05:45) have
// neither gaps nor repeats.
//
// # Cron syntax
//
// Five fields are minute hour day-of-month month day-of-week and fire at
// second zero, as in crontab and Kubernetes CronJob; six fields put a
// seconds field first. Each field is a comma-separated list; each element
// is "*" (or "?"), a value, or a range "lo-hi", optionally followed by a
// step "/n" ("5/15" runs from 5 to the field's maximum). Values: second and
// minute 0-59, hour 0-23, day-of-month 1-31, month 1-12 or jan-dec,
// day-of-week 0-6 from Sunday or sun-sat (names in any case); a number may
// carry a leading "+".
//
// Every five-field expression the standard parser of robfig/cron accepts
// (and so Kubernetes CronJob) is accepted with the same meaning. A step is
// any positive number, and one as large as the field's span or larger keeps
// the first value only: "*/60" in minutes is minute 0, "*/24" in hours is
// hour 0, "*/7" in day-of-week is Sunday (a restriction, so "0 0 13 * */7"
// fires on the 13th and on Sundays), "*/12" in months is January. Empty
// elements of a list are skipped ("1,,2" is "1,2"). Two forms are refused
// where that parser reads something other than what is written: a range
// starting at "*" ("*-5", which it reads as "*") and a field with no value
// at all (","), which would never fire. Also refused: ranges that run
// backwards, values out of range (day-of-week 7 included, as there), a
// step of zero, "TZ=" prefixes (the schedule's time zone says that) and
// Quartz extensions (L, W, #). The reason names the field and quotes what
// was written in it (minute field "*-5": ...), and a *CronFieldError
// carries the same. The parser is this package's own rather than a
// library's because a definition's error must name the field and the text.
package schedule
