package operator

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
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
}

func TestJobOfRun(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "billing.nightly", JobOfRun("billing.nightly@1767225600000"))
	assert.Equal(t, "a@b", JobOfRun("a@b@1"))
	assert.Empty(t, JobOfRun("dag-run/node"))
}
