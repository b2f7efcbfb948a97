package quota_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/quota"
)

func limitOf(n int64) *int64 { return &n }

func TestChangeValidateNamesEveryBadField(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change quota.Change
		want   []string // each in the error; none: valid
	}{
		{"one limit of a team is enough", quota.Change{Team: "payments", MaxJobs: limitOf(10)}, nil},
		{"zero is unlimited, and valid", quota.Change{Team: quota.DefaultTeam, MaxRunsPerMinute: limitOf(0)}, nil},
		{"the largest limit the store keeps is valid", quota.Change{Team: "payments", MaxConcurrentRuns: limitOf(quota.MaxLimit)}, nil},
		{"a change without a limit says which to set", quota.Change{Team: "payments"}, []string{"max_jobs, max_concurrent_runs, max_runs_per_minute: set at least one"}},
		{"a change without a team names the team", quota.Change{MaxJobs: limitOf(1)}, []string{"team: required"}},
		{"a team with a brace cannot be a Redis hash tag", quota.Change{Team: "a{b}", MaxJobs: limitOf(1)}, []string{`team "a{b}"`}},
		{"negative limits are named each", quota.Change{Team: "payments", MaxJobs: limitOf(-1), MaxRunsPerMinute: limitOf(-3)},
			[]string{"max_jobs -1: must be 0 (unlimited) or positive", "max_runs_per_minute -3: must be 0 (unlimited) or positive"}},
		{"a limit past what the store keeps is named", quota.Change{Team: "payments", MaxConcurrentRuns: limitOf(quota.MaxLimit + 1)},
			[]string{"max_concurrent_runs 2147483648: at most 2147483647"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.change.Validate()
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestChangeApplyKeepsWhatItDoesNotSet(t *testing.T) {
	t.Parallel()
	rows := []quota.Quota{{Team: quota.DefaultTeam, MaxJobs: 100, MaxConcurrentRuns: 5}, {Team: "payments", MaxJobs: 1000, MaxRunsPerMinute: 600}}
	tests := []struct {
		name   string
		change quota.Change
		want   quota.Quota
	}{
		{"a limit left out keeps the team's own value", quota.Change{Team: "payments", MaxJobs: limitOf(0)},
			quota.Quota{Team: "payments", MaxJobs: 0, MaxRunsPerMinute: 600}},
		{"a team without a row starts from no limit, not from the default's", quota.Change{Team: "search", MaxConcurrentRuns: limitOf(2)},
			quota.Quota{Team: "search", MaxConcurrentRuns: 2}},
		{"the default row is changed as a row", quota.Change{Team: quota.DefaultTeam, MaxJobs: limitOf(50)},
			quota.Quota{Team: quota.DefaultTeam, MaxJobs: 50, MaxConcurrentRuns: 5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, tc.change.Apply(rows))
		})
	}
}

func TestSetWritesTheRowAndSaysWhatChanged(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := quota.NewMemory()
	require.NoError(t, s.SetQuota(ctx, quota.Quota{Team: "payments", MaxJobs: 1000}))

	before, after, err := quota.Set(ctx, s, quota.Change{Team: "payments", MaxJobs: limitOf(20), MaxRunsPerMinute: limitOf(600)})
	require.NoError(t, err)
	assert.Equal(t, quota.Quota{Team: "payments", MaxJobs: 1000}, before)
	assert.Equal(t, quota.Quota{Team: "payments", MaxJobs: 20, MaxRunsPerMinute: 600}, after)
	assert.Equal(t, "max_jobs 1000 -> 20, max_runs_per_minute unlimited -> 600", quota.Diff(before, after))
	rows, err := s.ListQuotas(ctx)
	require.NoError(t, err)
	assert.Equal(t, []quota.Quota{after}, rows)

	_, _, err = quota.Set(ctx, s, quota.Change{Team: "payments", MaxJobs: limitOf(-1)})
	require.ErrorContains(t, err, "max_jobs -1")
	rows, err = s.ListQuotas(ctx)
	require.NoError(t, err)
	assert.Equal(t, []quota.Quota{after}, rows, "a refused change writes nothing")
	assert.Equal(t, "no limit changed", quota.Diff(after, after))
}
