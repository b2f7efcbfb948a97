package loadgen

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func collect(p *Plan, from, to time.Time) []RunKey {
	var out []RunKey
	for k := range p.Expected(from, to) {
		out = append(out, k)
	}
	return out
}

func TestPlanRates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		w        Workload
		wantRate float64
		period   time.Duration
	}{
		{
			name:     "a million jobs at 2000/s, default mix",
			w:        Workload{Prefix: "lg", Jobs: 1_000_000, Rate: 2000, Start: t0, Duration: 3 * time.Minute, Target: Target{Handler: "noop"}},
			wantRate: 2000,
		},
		{
			name:     "interval only: N/P",
			w:        Workload{Prefix: "lg", Jobs: 10, Rate: 2, Duration: time.Minute, Mix: Mix{Interval: 1}, Target: Target{Handler: "noop"}},
			wantRate: 2,
			period:   5 * time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := NewPlan(tt.w)
			require.NoError(t, err)
			assert.InEpsilon(t, tt.wantRate, p.PlannedRate, 0.001)
			assert.Equal(t, tt.w.Jobs, p.IntervalJobs+p.CronJobs+p.AtJobs)
			if tt.period != 0 {
				assert.Equal(t, tt.period, p.Period)
			}
		})
	}
}

func TestPlanExpectedMatchesRate(t *testing.T) {
	t.Parallel()
	// 30,000 jobs at 500/s over a window that is a whole number of interval
	// periods: the expected count is the planned rate times the window, up to
	// the rounding of the cron phases.
	p, err := NewPlan(Workload{Prefix: "lg", Jobs: 30_000, Rate: 500, Start: t0, Duration: 2 * time.Minute, Target: Target{Handler: "noop"}})
	require.NoError(t, err)
	window := 10 * p.Period
	got := len(collect(p, t0, t0.Add(window)))
	want := p.PlannedRate * window.Seconds()
	// at jobs only fall inside [t0, t0+Duration): count them separately.
	assert.InDelta(t, want, float64(got), want*0.02+float64(p.AtJobs))
}

func TestExpectedIntervalGrid(t *testing.T) {
	t.Parallel()
	p, err := NewPlan(Workload{Prefix: "lg", Jobs: 10, Rate: 2, Duration: time.Minute, Mix: Mix{Interval: 1}, Target: Target{Handler: "noop"}})
	require.NoError(t, err)
	from := t0.Add(1234 * time.Millisecond)
	keys := collect(p, from, from.Add(10*time.Second))
	require.Len(t, keys, 20, "10 jobs every 5s over 10s")
	perJob := map[uint32]int{}
	for _, k := range keys {
		perJob[k.Job]++
		off := int64(k.Job) * 500 // phases spread evenly over 5s
		assert.Zero(t, (k.DueMs-off)%5000, "job %d due %d is on its grid", k.Job, k.DueMs)
		assert.GreaterOrEqual(t, k.DueMs, from.UnixMilli())
		assert.Less(t, k.DueMs, from.Add(10*time.Second).UnixMilli())
	}
	assert.Len(t, perJob, 10)
	for j, n := range perJob {
		assert.Equal(t, 2, n, "job %d", j)
	}
}

func TestExpectedCronAndAt(t *testing.T) {
	t.Parallel()
	p, err := NewPlan(Workload{Prefix: "lg", Jobs: 7200, Rate: 10, Start: t0, Duration: time.Minute,
		Mix: Mix{Interval: 0.5, Cron: 0.5}, Target: Target{Handler: "noop"}})
	require.NoError(t, err)
	require.Equal(t, 3600, p.CronJobs)
	// Cron job c fires at second c of every hour.
	spec := p.Spec(p.IntervalJobs + 61)
	assert.Equal(t, "1 1 * * * *", spec.GetSchedule().GetCron().GetExpression())
	var cron []RunKey
	for k := range p.Expected(t0.Add(-30*time.Second), t0.Add(30*time.Second)) {
		if int(k.Job) >= p.IntervalJobs {
			cron = append(cron, k)
		}
	}
	// Seconds 3570..3599 of the previous hour and 0..29 of this one.
	require.Len(t, cron, 60)
	for _, k := range cron {
		c := int(k.Job) - p.IntervalJobs
		assert.Equal(t, int64(c), (k.DueMs/1000)%3600)
	}

	herd, err := NewPlan(Workload{Prefix: "h", Jobs: 1000, HerdAt: t0.Add(1500 * time.Microsecond), Target: Target{URL: "http://127.0.0.1:1/effect"}})
	require.NoError(t, err)
	keys := collect(herd, t0, t0.Add(time.Second))
	require.Len(t, keys, 1000)
	for _, k := range keys {
		assert.Equal(t, t0.Add(time.Millisecond).UnixMilli(), k.DueMs, "every herd run is due at the same instant")
	}
	assert.Empty(t, collect(herd, t0.Add(time.Second), t0.Add(time.Hour)))
}

func TestSpecsAreValid(t *testing.T) {
	t.Parallel()
	p, err := NewPlan(Workload{Prefix: "lg.run:1", Jobs: 3000, Rate: 100, Start: t0, Duration: time.Minute, PayloadBytes: 100,
		Target: Target{URL: "http://127.0.0.1:8080/effect"}})
	require.NoError(t, err)
	require.NotZero(t, p.IntervalJobs)
	require.NotZero(t, p.CronJobs)
	require.NotZero(t, p.AtJobs)
	for i := range p.Jobs {
		spec := p.Spec(i)
		require.Empty(t, jobspec.Limits{}.ValidateSpec(spec), "job %d", i)
		require.Len(t, spec.GetPayload(), 100)
	}
}

func TestParseRunID(t *testing.T) {
	t.Parallel()
	p, err := NewPlan(Workload{Prefix: "lg", Jobs: 10, Rate: 2, Duration: time.Minute, Mix: Mix{Interval: 1}, Target: Target{Handler: "noop"}})
	require.NoError(t, err)
	tests := []struct {
		id   string
		want RunKey
		ok   bool
	}{
		{"loadgen.lg-7@1767148200000", RunKey{Job: 7, DueMs: 1767148200000}, true},
		{"loadgen.lg-10@1767148200000", RunKey{}, false}, // beyond the plan's jobs
		{"loadgen.lgx-1@1", RunKey{}, false},
		{"other-1@1", RunKey{}, false},
		{"loadgen.lg-1", RunKey{}, false},
		{"loadgen.lg-a@1", RunKey{}, false},
		{"loadgen.lg-1@x", RunKey{}, false},
	}
	for _, tt := range tests {
		got, ok := p.ParseRunID(tt.id)
		assert.Equal(t, tt.ok, ok, tt.id)
		assert.Equal(t, tt.want, got, tt.id)
	}
	assert.Equal(t, "loadgen.lg-3", p.JobID(3))
}

func TestPlanRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		w    Workload
		want []string
	}{
		{"everything wrong", Workload{Prefix: "bad prefix", Jobs: 0, Duration: 0, Target: Target{}},
			[]string{"prefix", "jobs 0", "target", "rate", "duration"}},
		{"too many jobs", Workload{Prefix: "x", Jobs: MaxJobs + 1, Rate: 1, Duration: time.Minute, Mix: Mix{Interval: 1}, Target: Target{Handler: "n"}},
			[]string{"jobs 1000001"}},
		{"period below a second", Workload{Prefix: "x", Jobs: 10, Rate: 100, Duration: time.Minute, Mix: Mix{Interval: 1}, Target: Target{Handler: "n"}},
			[]string{"period of 100ms"}},
		{"cron alone beyond the rate", Workload{Prefix: "x", Jobs: 100000, Rate: 1, Duration: time.Minute, Mix: Mix{Interval: 0.5, Cron: 0.5}, Target: Target{Handler: "n"}},
			[]string{"cron and at jobs alone"}},
		{"at jobs need a start", Workload{Prefix: "x", Jobs: 100, Rate: 10, Duration: time.Minute, Mix: Mix{Interval: 0.5, At: 0.5}, Target: Target{Handler: "n"}},
			[]string{"start: required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := NewPlan(tt.w)
			require.Error(t, err)
			for _, w := range tt.want {
				assert.ErrorContains(t, err, w)
			}
		})
	}
}

func TestParseMix(t *testing.T) {
	t.Parallel()
	m, err := ParseMix("interval=0.7, cron=0.2,at=0.1")
	require.NoError(t, err)
	assert.Equal(t, Mix{Interval: 0.7, Cron: 0.2, At: 0.1}, m)
	_, err = ParseMix("interval=0.7")
	assert.ErrorContains(t, err, "add up to 0.7")
	_, err = ParseMix("daily=1")
	assert.ErrorContains(t, err, `kind "daily"`)
	_, err = ParseMix("interval=1.5,cron=-0.5")
	assert.ErrorContains(t, err, "cron share -0.5")
}

func TestNextDueAgreesWithExpected(t *testing.T) {
	t.Parallel()
	p, err := NewPlan(Workload{Prefix: "lg", Jobs: 7300, Rate: 50, Start: t0, Duration: time.Minute,
		Mix: Mix{Interval: 0.4, Cron: 0.5, At: 0.1}, Target: Target{Handler: "noop"}})
	require.NoError(t, err)
	from := t0.Add(-90 * time.Minute).Add(777 * time.Millisecond)
	first := map[uint32]int64{}
	for k := range p.Expected(from, from.Add(3*time.Hour)) {
		if _, ok := first[k.Job]; !ok || k.DueMs < first[k.Job] {
			first[k.Job] = k.DueMs
		}
	}
	for i := range p.Jobs {
		got, ok := p.NextDue(i, from)
		want, wantOK := first[uint32(i)]
		require.Equal(t, wantOK, ok, "job %d", i)
		if ok {
			require.Equal(t, want, got, "job %d", i)
		}
	}
	_, ok := p.NextDue(p.Jobs-1, t0.Add(2*time.Minute))
	assert.False(t, ok, "a one-off has no occurrence after its instant")
}

func TestNotBefore(t *testing.T) {
	t.Parallel()
	p, err := NewPlan(Workload{Prefix: "lg", Jobs: 10, Rate: 2, Duration: time.Minute, Mix: Mix{Interval: 1}, Target: Target{Handler: "noop"}})
	require.NoError(t, err)
	plain := collect(p, t0, t0.Add(20*time.Second))
	p.NotBefore = t0.Add(7300 * time.Millisecond)
	keys := collect(p, t0, t0.Add(20*time.Second))
	for _, k := range keys {
		assert.GreaterOrEqual(t, k.DueMs, p.NotBefore.UnixMilli(), "nothing is due before NotBefore")
	}
	// The same grid from NotBefore on.
	var want []RunKey
	for _, k := range plain {
		if k.DueMs >= p.NotBefore.UnixMilli() {
			want = append(want, k)
		}
	}
	assert.ElementsMatch(t, want, keys)
	// The specs say so: job 3 (phase 1.5s) starts at its first grid point
	// at or after NotBefore: 5s-grid at 1.5s phase, first >= 7.3s is 11.5s.
	start := p.Spec(3).GetSchedule().GetInterval().GetStart().AsTime()
	assert.Equal(t, t0.Add(11500*time.Millisecond), start)
	assert.Empty(t, jobspec.Limits{}.ValidateSpec(p.Spec(3)))
	due, ok := p.NextDue(3, t0)
	require.True(t, ok)
	assert.Equal(t, start.UnixMilli(), due)
}

func TestSpecMisfire(t *testing.T) {
	t.Parallel()
	for _, m := range []sundialv1.MisfirePolicy{sundialv1.MisfirePolicy_MISFIRE_POLICY_UNSPECIFIED, sundialv1.MisfirePolicy_MISFIRE_POLICY_FIRE_ALL} {
		p, err := NewPlan(Workload{Prefix: "m", Jobs: 100, Rate: 10, Duration: time.Minute, Start: time.Unix(1_700_000_000, 0),
			Target: Target{Handler: "noop"}, Misfire: m})
		require.NoError(t, err)
		for i := range p.Jobs {
			require.Equal(t, m, p.Spec(i).GetSchedule().GetMisfirePolicy(), "job %d (%s)", i, p.Kind(i))
		}
	}
}

// TestSplayedHerd: a splayed herd is of valid crons that fall due once, at
// the herd's instant rounded up to a whole second, with the splay window;
// a splay is refused on a steady workload and beyond jobspec.MaxSplay.
func TestSplayedHerd(t *testing.T) {
	at := time.Date(2026, 11, 29, 8, 15, 30, 250e6, time.UTC)
	p, err := NewPlan(Workload{Prefix: "h", Jobs: 3, HerdAt: at, Splay: 30 * time.Second, Target: Target{Handler: "noop"}})
	require.NoError(t, err)
	want := time.Date(2026, 11, 29, 8, 15, 31, 0, time.UTC)
	assert.Equal(t, want, p.HerdAt)
	spec := p.Spec(2)
	assert.Equal(t, "31 15 8 29 11 *", spec.GetSchedule().GetCron().GetExpression())
	assert.Equal(t, 30*time.Second, spec.GetSplay().AsDuration())
	assert.Empty(t, jobspec.Validate(spec))
	s, errs := jobspec.CompileSchedule(spec.GetSchedule(), at.Add(-time.Hour))
	require.Empty(t, errs)
	next, ok := s.Next(at.Add(-time.Minute))
	require.True(t, ok)
	assert.Equal(t, want, next, "the cron falls due at the herd's instant")
	for _, r := range slices.Collect(p.Expected(p.HerdAt, p.HerdAt.Add(time.Millisecond))) {
		assert.Equal(t, want.UnixMilli(), r.DueMs)
	}

	unsplayed, err := NewPlan(Workload{Prefix: "h", Jobs: 3, HerdAt: at, Target: Target{Handler: "noop"}})
	require.NoError(t, err)
	assert.NotNil(t, unsplayed.Spec(0).GetSchedule().GetAt(), "without a splay a herd stays one-offs")

	_, err = NewPlan(Workload{Prefix: "h", Jobs: 3, HerdAt: at, Splay: 2 * time.Hour, Target: Target{Handler: "noop"}})
	assert.ErrorContains(t, err, "splay 2h0m0s")
	_, err = NewPlan(Workload{Prefix: "h", Jobs: 3, Rate: 1, Duration: time.Minute, Splay: time.Second, Target: Target{Handler: "noop"}})
	assert.ErrorContains(t, err, "only a herd is splayed")
}
