package jobspec_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/schedule"
)

// TestCatchUp runs the misfire rule's scenarios in testdata/catch_up. Each
// is one call:
//
//	catch-up policy=<fire-once|fire-all|skip|unspecified> window=<duration>
//	         missed=<RFC 3339> now=<RFC 3339> [limit=<n>] [zone=<IANA zone>]
//	<schedule: "every <duration>", "cron <expression>" or "at <RFC 3339>">
//
// and prints the occurrences fired, where the decision ends and the
// schedule continues, and how many times the rule asked the schedule for
// its next occurrence: the number that must stay small however many
// occurrences were missed. Rewrite with -rewrite.
func TestCatchUp(t *testing.T) {
	t.Parallel()
	datadriven.RunTest(t, "testdata/catch_up", func(t *testing.T, d *datadriven.TestData) string {
		if d.Cmd != "catch-up" {
			d.Fatalf(t, "unknown command %q", d.Cmd)
		}
		policy := map[string]sundialv1.MisfirePolicy{
			"fire-once":   sundialv1.MisfirePolicy_MISFIRE_POLICY_FIRE_ONCE,
			"fire-all":    sundialv1.MisfirePolicy_MISFIRE_POLICY_FIRE_ALL,
			"skip":        sundialv1.MisfirePolicy_MISFIRE_POLICY_SKIP,
			"unspecified": sundialv1.MisfirePolicy_MISFIRE_POLICY_UNSPECIFIED,
		}
		var (
			p           sundialv1.MisfirePolicy
			window      time.Duration
			missed, now time.Time
			limit       = 1000
			zone        = "UTC"
			err         error
		)
		for _, a := range d.CmdArgs {
			v := a.Vals[0]
			switch a.Key {
			case "policy":
				var ok bool
				if p, ok = policy[v]; !ok {
					d.Fatalf(t, "unknown policy %q", v)
				}
			case "window":
				window, err = time.ParseDuration(v)
			case "missed":
				missed, err = time.Parse(time.RFC3339Nano, v)
			case "now":
				now, err = time.Parse(time.RFC3339Nano, v)
			case "limit":
				limit, err = strconv.Atoi(v)
			case "zone":
				zone = v
			default:
				d.Fatalf(t, "unknown argument %q", a.Key)
			}
			if err != nil {
				d.Fatalf(t, "%s: %v", a.Key, err)
			}
		}
		s := &countingSchedule{s: compileLine(t, d, zone)}
		plan := jobspec.CatchUp(s, p, window, missed, now, limit)

		var b strings.Builder
		switch n := len(plan.Fire); {
		case n == 0:
			b.WriteString("fire: none\n")
		case n <= 6:
			for _, f := range plan.Fire {
				fmt.Fprintf(&b, "fire: %s\n", stamp(f))
			}
		default:
			fmt.Fprintf(&b, "fire: %d occurrences, %s ... %s\n", n, stamp(plan.Fire[0]), stamp(plan.Fire[n-1]))
		}
		fmt.Fprintf(&b, "covered: %s\n", stamp(plan.Covered))
		if plan.Next.IsZero() {
			b.WriteString("next: none\n")
		} else {
			fmt.Fprintf(&b, "next: %s\n", stamp(plan.Next))
		}
		fmt.Fprintf(&b, "next calls: %d\n", s.calls)
		return b.String()
	})
}

func compileLine(t *testing.T, d *datadriven.TestData, zone string) *schedule.Schedule {
	kind, rest, _ := strings.Cut(strings.TrimSpace(d.Input), " ")
	spec := schedule.Spec{TimeZone: zone}
	var err error
	switch kind {
	case "every":
		spec.Kind = schedule.KindInterval
		spec.Every, err = time.ParseDuration(rest)
	case "cron":
		spec.Kind = schedule.KindCron
		spec.Cron = rest
		spec.Nonexistent = schedule.NonexistentShiftForward
		spec.Ambiguous = schedule.AmbiguousFirst
	case "at":
		spec.Kind = schedule.KindAt
		spec.At, err = time.Parse(time.RFC3339Nano, rest)
	default:
		d.Fatalf(t, "unknown schedule %q", d.Input)
	}
	if err != nil {
		d.Fatalf(t, "schedule %q: %v", d.Input, err)
	}
	s, err := schedule.Compile(spec)
	if err != nil {
		d.Fatalf(t, "schedule %q: %v", d.Input, err)
	}
	return s
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// countingSchedule counts the calls of Next, the rule's unit of work.
type countingSchedule struct {
	s     *schedule.Schedule
	calls int
}

func (c *countingSchedule) Next(after time.Time) (time.Time, bool) {
	c.calls++
	return c.s.Next(after)
}

// TestCatchUpAgreesWithStepping checks the jumping rule against the
// obvious one, which steps through every occurrence from missed to now, on
// many small cases: the same occurrences fire and the schedule continues at
// the same place.
func TestCatchUpAgreesWithStepping(t *testing.T) {
	t.Parallel()
	specs := []schedule.Spec{
		{Kind: schedule.KindInterval, Every: 7 * time.Second, TimeZone: "UTC"},
		{Kind: schedule.KindCron, Cron: "*/5 * * * *", TimeZone: "UTC", Nonexistent: schedule.NonexistentShiftForward, Ambiguous: schedule.AmbiguousFirst},
		{Kind: schedule.KindCron, Cron: "30 1-3 * * *", TimeZone: "Europe/Berlin", Nonexistent: schedule.NonexistentShiftForward, Ambiguous: schedule.AmbiguousBoth},
	}
	policies := []sundialv1.MisfirePolicy{
		sundialv1.MisfirePolicy_MISFIRE_POLICY_FIRE_ONCE,
		sundialv1.MisfirePolicy_MISFIRE_POLICY_FIRE_ALL,
		sundialv1.MisfirePolicy_MISFIRE_POLICY_SKIP,
	}
	rng := rand.New(rand.NewPCG(1, 2))
	// Around the fall-back night in Berlin, where AmbiguousBoth fires twice.
	base := time.Date(2026, 10, 24, 22, 0, 0, 0, time.UTC)
	for _, spec := range specs {
		s, err := schedule.Compile(spec)
		if err != nil {
			t.Fatal(err)
		}
		for range 200 {
			missed, ok := s.Next(base.Add(time.Duration(rng.Int64N(int64(30 * time.Hour)))))
			if !ok {
				t.Fatal("schedule without occurrences")
			}
			now := missed.Add(time.Duration(rng.Int64N(int64(3 * time.Hour))))
			window := time.Duration(1+rng.Int64N(int64(4*time.Hour)/int64(time.Millisecond))) * time.Millisecond
			limit := 1 + rng.IntN(20)
			for _, p := range policies {
				got := jobspec.CatchUp(s, p, window, missed, now, limit)
				want := steppedCatchUp(s, p, window, missed, now, limit)
				if !slices.EqualFunc(got.Fire, want.Fire, time.Time.Equal) || !got.Covered.Equal(want.Covered) || !got.Next.Equal(want.Next) {
					t.Fatalf("%s %s missed %s now %s window %s limit %d:\n got  %v\n want %v",
						spec.Cron, p, stamp(missed), stamp(now), window, limit, got, want)
				}
			}
		}
	}
}

// steppedCatchUp is the rule written the obvious way: list every missed
// occurrence, keep those inside the window, pick by policy.
func steppedCatchUp(s *schedule.Schedule, p sundialv1.MisfirePolicy, window time.Duration, missed, now time.Time, limit int) jobspec.CatchUpPlan {
	var inside []time.Time
	for t, ok := missed, true; ok && !t.After(now); t, ok = s.Next(t) {
		if !t.Before(now.Add(-window)) {
			inside = append(inside, t)
		}
	}
	plan := jobspec.CatchUpPlan{Covered: now}
	switch {
	case len(inside) == 0 || p == sundialv1.MisfirePolicy_MISFIRE_POLICY_SKIP:
	case p == sundialv1.MisfirePolicy_MISFIRE_POLICY_FIRE_ALL:
		plan.Fire = inside
		if len(inside) > limit {
			plan.Fire = inside[:limit]
			plan.Covered = inside[limit-1]
		}
	default:
		plan.Fire = inside[len(inside)-1:]
	}
	plan.Next, _ = s.Next(plan.Covered)
	return plan
}
