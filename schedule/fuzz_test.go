package schedule

import (
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
