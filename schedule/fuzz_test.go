package schedule

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzCompile feeds arbitrary specs to Compile. It must never panic; a
// rejection must name a field and a reason; an accepted schedule must yield
// strictly increasing fire times after the starting point, agree with
// Between, and (for cron) fire only at matching wall times or at gap times
// shifted forward.
func FuzzCompile(f *testing.F) {
	zones := []string{
		"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu",
		"Australia/Sydney", "Antarctica/Troll", "Pacific/Chatham", "Europe/Dublin", "Mars/Olympus", "",
	}
	seeds := []string{
		"* * * * *", "*/15 * * * * *", "0 0 29 2 *", "0 0 30 2 *", "0 0 31 2 1", "30 2 * * *",
		"0,30 1-3 * * *", "59 59 23 31 12 *", "0 0 13 * 5", "0 0 */10 * 1", "@yearly", "@weekly",
		"@every 90m", "@every 1s", "@every", "TZ=", "CRON_TZ=Europe/Berlin 0 0 * * *", "TZ=x",
		"1-5/2 * * * *", "5/0 * * * *", "* * * * ? *", "jan-dec", "0 0 * * sun-sat",
	}
	for i, s := range seeds {
		f.Add(s, uint8(KindCron), int64(time.Hour), int64(0), uint8(i), uint8(i), int64(1767225600+i*86400*37))
	}
	f.Add("", uint8(KindInterval), int64(90*time.Minute), int64(15*time.Minute), uint8(1), uint8(0), int64(1774746000))
	f.Add("", uint8(KindInterval|0x80), int64(7*time.Second), int64(0), uint8(2), uint8(0), int64(0))
	f.Add("", uint8(KindAt), int64(0), int64(0), uint8(0), uint8(0), int64(0))
	f.Add("", uint8(KindDelay), int64(time.Second), int64(0), uint8(0), uint8(0), int64(0))
	f.Add("", uint8(KindImmediate), int64(0), int64(0), uint8(0), uint8(0), int64(0))

	const (
		minUnix = -2208988800 // 1900-01-01
		span    = 300 * 365 * 86400
	)
	f.Fuzz(func(t *testing.T, expr string, kind uint8, every, offset int64, zone, policy uint8, afterSec int64) {
		after := time.Unix(minUnix+((afterSec%span)+span)%span, offset%int64(time.Second)).UTC()
		spec := Spec{
			Kind:        Kind(kind & 0x7f % 7),
			Reference:   after.Add(-time.Duration(every % int64(time.Hour))),
			At:          after.Add(time.Duration(offset)),
			Delay:       time.Duration(every),
			Cron:        expr,
			Every:       time.Duration(every),
			Offset:      time.Duration(offset),
			TimeZone:    zones[int(zone)%len(zones)],
			Nonexistent: NonexistentPolicy(policy % 3),
			Ambiguous:   AmbiguousPolicy(policy / 3 % 4),
		}
		if kind&0x80 != 0 {
			spec.Start, spec.Offset = after.Add(-time.Duration(offset)), 0
		}
		// Keep only the fields the kind reads, so most inputs compile.
		switch spec.Kind {
		case KindImmediate:
			spec.At, spec.Delay, spec.Cron, spec.Every, spec.Offset, spec.Start = time.Time{}, 0, "", 0, 0, time.Time{}
		case KindAt:
			spec.Delay, spec.Cron, spec.Every, spec.Offset, spec.Start = 0, "", 0, 0, time.Time{}
		case KindDelay:
			spec.At, spec.Cron, spec.Every, spec.Offset, spec.Start = time.Time{}, "", 0, 0, time.Time{}
		case KindCron:
			spec.At, spec.Delay, spec.Every, spec.Offset, spec.Start = time.Time{}, 0, 0, 0, time.Time{}
		case KindInterval:
			spec.At, spec.Delay, spec.Cron = time.Time{}, 0, ""
		}

		s, err := Compile(spec)
		if err != nil {
			fes := FieldErrors(err)
			if len(fes) == 0 {
				t.Fatalf("error without a field: %v", err)
			}
			for _, fe := range fes {
				if fe.Field == "" || fe.Reason == "" {
					t.Fatalf("incomplete field error %#v", fe)
				}
			}
			return
		}

		const steps = 8
		var got []time.Time
		prev := after
		for range steps {
			next, ok := s.Next(prev)
			if !ok {
				break
			}
			if !next.After(prev) {
				t.Fatalf("%+v: Next(%s) = %s, not strictly after", spec, prev, next)
			}
			got = append(got, next)
			prev = next
		}
		if len(got) > 0 {
			between := s.Between(after, got[len(got)-1], steps)
			if len(between) != len(got) {
				t.Fatalf("%+v: Between gave %d times, Next %d", spec, len(between), len(got))
			}
			for i := range got {
				if !between[i].Equal(got[i]) {
					t.Fatalf("%+v: Between[%d] = %s, Next gave %s", spec, i, between[i], got[i])
				}
			}
		}
		c, isCron := s.calc.(cronCalc)
		if !isCron {
			return
		}
		for _, g := range got {
			if g.Nanosecond() != 0 {
				t.Fatalf("%+v: cron fire time %s is not a whole second", spec, g)
			}
			if c.matches(wallAt(g, offsetAt(g, s.loc))) {
				continue
			}
			// Otherwise it must be a matching gap time shifted forward: the
			// wall time it would show under the offset before its period.
			start, _ := g.In(s.loc).ZoneBounds()
			before := offsetAt(start.Add(-time.Nanosecond), s.loc)
			if spec.Nonexistent != NonexistentShiftForward || start.IsZero() || before >= offsetAt(g, s.loc) || !c.matches(wallAt(g, before)) {
				t.Fatalf("%+v: fire time %s matches no wall time", spec, g)
			}
		}
	})
}

// FuzzParseCron feeds arbitrary text to the cron parser. It must never
// panic. A rejection of a field must be a *CronFieldError naming one of the
// six fields and quoting a field of the input, without a conversion
// library's message. An accepted expression must allow only values inside
// each field's range, at least one in each, and must read back the same
// from its canonical form (every field as a list of numbers, or "*").
func FuzzParseCron(f *testing.F) {
	for _, s := range []string{
		"* * * * *", "*/15 * * * * *", "0 0 29 2 *", "5/20 1-3,7 */10 jan,MAR-apr sun,6", "0-59/30 0 0 ? * ?",
		"1,,2 * * * *", "*-5 * * * *", "*/60 * * * *", "0 0 * * 5-1", "@weekly", "@HOURLY", "@fortnightly",
		"99999999999999999999 * * * *", "0 0 L * *", "0 0 * * 5#3", "0 0 1,* * 1-5", "", "   ", "* * *",
	} {
		f.Add(s)
	}
	names := map[string]bool{"second": true, "minute": true, "hour": true, "day-of-month": true, "month": true, "day-of-week": true}
	f.Fuzz(func(t *testing.T, expr string) {
		c, err := parseCronFields(expr)
		if err != nil {
			msg := err.Error()
			// What the input says may be quoted; the rest must not be a
			// conversion library's message.
			own := msg
			for _, w := range append(strings.Fields(expr), strconv.Quote(expr), strconv.Quote(strings.TrimSpace(expr))) {
				own = strings.ReplaceAll(own, w, "")
			}
			if strings.Contains(own, "strconv") || strings.Contains(own, "invalid syntax") {
				t.Fatalf("%q: conversion message leaked: %s", expr, msg)
			}
			var fe *CronFieldError
			if !errors.As(err, &fe) {
				if !strings.Contains(msg, "expected 5 fields") && !strings.Contains(msg, "unknown descriptor") {
					t.Fatalf("%q: unexpected error shape: %s", expr, msg)
				}
				return
			}
			if !names[fe.Field] || fe.Reason == "" || !slices.Contains(strings.Fields(expr), fe.Text) {
				t.Fatalf("%q: field error %#v does not name a field and quote its text", expr, fe)
			}
			return
		}
		sets := []struct {
			set      uint64
			min, max int
		}{{c.second, 0, 59}, {c.minute, 0, 59}, {c.hour, 0, 23}, {c.dom, 1, 31}, {c.month, 1, 12}, {c.dow, 0, 6}}
		var canon []string
		for i, s := range sets {
			inRange := (uint64(1)<<uint(s.max+1) - 1) &^ (uint64(1)<<uint(s.min) - 1)
			if s.set == 0 || s.set&^inRange != 0 {
				t.Fatalf("%q: field %d allows %b, outside %d-%d or nothing", expr, i, s.set, s.min, s.max)
			}
			if (i == 3 && c.domStar) || (i == 5 && c.dowStar) {
				if s.set != inRange {
					t.Fatalf("%q: field %d is unrestricted but allows %b", expr, i, s.set)
				}
				canon = append(canon, "*")
				continue
			}
			var vals []string
			for v := s.min; v <= s.max; v++ {
				if s.set&(1<<uint(v)) != 0 {
					vals = append(vals, strconv.Itoa(v))
				}
			}
			canon = append(canon, strings.Join(vals, ","))
		}
		again, err := parseCronFields(strings.Join(canon, " "))
		if err != nil || again != c {
			t.Fatalf("%q: canonical form %q reads back as %+v, %v; want %+v", expr, strings.Join(canon, " "), again, err, c)
		}
	})
}
