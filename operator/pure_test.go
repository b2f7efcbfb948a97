package operator

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

func cronJob(id, expr string) *sundialv1.JobSpec {
	return &sundialv1.JobSpec{
		Id: id, OwnerTeam: "team",
		Schedule: &sundialv1.Schedule{TimeZone: "UTC", Kind: &sundialv1.Schedule_Cron{Cron: &sundialv1.Cron{Expression: expr}}},
		Target:   &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "noop"}}},
	}
}

func TestOccurrences(t *testing.T) {
	t.Parallel()
	s, errs := jobspec.CompileSchedule(cronJob("a", "*/10 * * * *").GetSchedule(), time.Time{})
	require.Empty(t, errs)
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	to := from.Add(2 * time.Hour)

	every, err := Occurrences(s, BackfillOptions{From: from, To: to, MaxConcurrent: 1})
	require.NoError(t, err)
	require.Len(t, every, 12, "from is included, to is not")
	assert.Equal(t, from, every[0])
	assert.Equal(t, to.Add(-10*time.Minute), every[11])

	hourly, err := Occurrences(s, BackfillOptions{From: from, To: to, Policy: BackfillOnePerWindow, Window: time.Hour, MaxConcurrent: 1})
	require.NoError(t, err)
	assert.Equal(t, []time.Time{from.Add(50 * time.Minute), from.Add(110 * time.Minute)}, hourly, "the latest of each window")

	everySecond, errs := jobspec.CompileSchedule(&sundialv1.Schedule{TimeZone: "UTC", Kind: &sundialv1.Schedule_Cron{Cron: &sundialv1.Cron{Expression: "* * * * * *"}}}, time.Time{})
	require.Empty(t, errs)
	_, err = Occurrences(everySecond, BackfillOptions{From: from, To: from.Add(48 * time.Hour), MaxConcurrent: 1})
	assert.ErrorContains(t, err, "more than 100000 occurrences")
}

func TestBackfillOptionsValidate(t *testing.T) {
	t.Parallel()
	err := BackfillOptions{Policy: BackfillOnePerWindow}.Validate()
	require.Error(t, err)
	for _, want := range []string{"from, to: both required", "window 0s: must be positive", "max concurrent 0: must be at least 1"} {
		assert.ErrorContains(t, err, want)
	}
	now := time.Now()
	assert.ErrorContains(t, BackfillOptions{From: now, To: now, MaxConcurrent: 1}.Validate(), "must be before to")
	assert.NoError(t, BackfillOptions{From: now, To: now.Add(time.Hour), MaxConcurrent: 1}.Validate())
	// A dry run enqueues nothing, so it needs no bound on pending runs.
	assert.NoError(t, BackfillOptions{From: now, To: now.Add(time.Hour), DryRun: true}.Validate())
	assert.ErrorContains(t, BackfillOptions{From: now, To: now.Add(time.Hour)}.Validate(), "max concurrent 0: must be at least 1")
}

func TestJobOfRun(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "billing.nightly", JobOfRun("billing.nightly@1767225600000"))
	assert.Equal(t, "a@b", JobOfRun("a@b@1"))
	assert.Empty(t, JobOfRun("dag-run/node"))
}

func TestRunsPerOccurrence(t *testing.T) {
	t.Parallel()
	sharded := func(n uint32) *sundialv1.JobSpec {
		s := cronJob("team.sharded", "* * * * *")
		s.Routing = &sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_SHARDED, Shards: n}
		return s
	}
	broadcast := func(pool string) *sundialv1.JobSpec {
		s := cronJob("team.broadcast", "* * * * *")
		s.Pool = pool
		s.Routing = &sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_BROADCAST}
		return s
	}
	pools := func(pool string) int { return map[string]int{"default": 3, "gpu": 7}[pool] }
	tests := []struct {
		name       string
		spec       *sundialv1.JobSpec
		members    func(string) int
		want       int
		lowerBound bool
	}{
		{"a plain job starts one run", cronJob("team.plain", "* * * * *"), pools, 1, false},
		{"round-robin routing starts one run", func() *sundialv1.JobSpec {
			s := cronJob("team.any", "* * * * *")
			s.Routing = &sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_ROUND_ROBIN}
			return s
		}(), pools, 1, false},
		{"a sharded job starts one run per shard", sharded(1024), pools, 1024, false},
		{"a sharded job needs no membership", sharded(64), nil, 64, false},
		{"a broadcast job starts one run per live member of its pool", broadcast("gpu"), pools, 7, false},
		{"a broadcast job without a pool uses the default pool", broadcast(""), pools, 3, false},
		{"a broadcast job with unknown membership is a lower bound of one", broadcast("gpu"), nil, 1, true},
		{"a broadcast job to a pool with no live member is a lower bound of one", broadcast("empty"), pools, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n, lower := runsPerOccurrence(tt.spec, tt.members)
			assert.Equal(t, tt.want, n)
			assert.Equal(t, tt.lowerBound, lower)
		})
	}
}

// noJobs stores no definition.
type noJobs struct{}

func (noJobs) GetJob(context.Context, string) (store.Job, error) {
	return store.Job{}, store.ErrNotFound
}

// TestPlanApplyLoadCountsFanOut: a job firing every second with 1,024
// shards adds 61,440 runs a minute, not 60, which is what the team's
// max_runs_per_minute and the runners see.
func TestPlanApplyLoadCountsFanOut(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	spec := cronJob("team.wide", "* * * * * *")
	spec.Routing = &sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_SHARDED, Shards: 1024}
	bc := cronJob("team.everyone", "0 * * * * *")
	bc.Routing = &sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_BROADCAST}
	op := New(Config{Jobs: noJobs{}, Shards: 16, Now: func() time.Time { return now }, Members: func(string) int { return 5 }})
	plans, err := op.PlanApply(t.Context(), []*sundialv1.JobSpec{spec, bc}, 1)
	require.NoError(t, err)
	require.Len(t, plans, 2)
	require.Empty(t, plans[0].Errors)
	assert.Equal(t, 1024, plans[0].RunsPerOccurrence)
	assert.False(t, plans[0].LoadLowerBound)
	assert.Equal(t, 61440, plans[0].Load[now.Add(5*time.Minute)], "runs in one minute bucket")
	assert.Equal(t, 5, plans[1].Load[now.Add(5*time.Minute)], "one broadcast a minute to 5 live members")

	unknown := New(Config{Jobs: noJobs{}, Shards: 16, Now: func() time.Time { return now }})
	plans, err = unknown.PlanApply(t.Context(), []*sundialv1.JobSpec{bc}, 1)
	require.NoError(t, err)
	assert.True(t, plans[0].LoadLowerBound, "membership unknown")
	assert.Equal(t, 1, plans[0].Load[now.Add(5*time.Minute)])
}

// TestNextFires: a DAG's or a job's schedule gives its next fire times as
// if accepted now, in its zone; none when paused, without a schedule, or
// when it does not compile.
func TestNextFires(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC)
	berlin := &sundialv1.Schedule{TimeZone: "Europe/Berlin", Kind: &sundialv1.Schedule_Cron{Cron: &sundialv1.Cron{Expression: "0 3 * * *"}}}
	for _, tc := range []struct {
		name   string
		sched  *sundialv1.Schedule
		paused bool
		want   []time.Time
	}{
		{name: "daily at 03:00 Berlin, across the switch to summer time", sched: berlin, want: []time.Time{
			time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC), time.Date(2026, 3, 30, 1, 0, 0, 0, time.UTC), time.Date(2026, 3, 31, 1, 0, 0, 0, time.UTC),
		}},
		{name: "paused", sched: berlin, paused: true},
		{name: "no schedule"},
		{name: "does not compile", sched: &sundialv1.Schedule{Kind: &sundialv1.Schedule_Cron{Cron: &sundialv1.Cron{Expression: "61 * * * *"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, NextFires(tc.sched, tc.paused, now, 3))
		})
	}
}
