package quota_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/quota"
	"github.com/sundialhq/sundial/quota/quotatest"
)

func TestMemoryConformance(t *testing.T) {
	t.Parallel()
	quotatest.Run(t, func(*testing.T) quota.Store { return quota.NewMemory() })
}

func TestEffective(t *testing.T) {
	t.Parallel()
	rows := []quota.Quota{{Team: quota.DefaultTeam, MaxJobs: 100, MaxConcurrentRuns: 5, MaxRunsPerMinute: 600}, {Team: "payments", MaxJobs: 1000}}
	tests := []struct {
		name string
		rows []quota.Quota
		team string
		want quota.Quota
	}{
		{"own row", rows, "payments", quota.Quota{Team: "payments", MaxJobs: 1000}},
		{"default row", rows, "search", quota.Quota{Team: "search", MaxJobs: 100, MaxConcurrentRuns: 5, MaxRunsPerMinute: 600}},
		{"no rows: unlimited", nil, "search", quota.Quota{Team: "search"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, quota.Effective(tc.rows, tc.team))
		})
	}
}

func TestCacheRereadsAfterTTL(t *testing.T) {
	t.Parallel()
	m := quota.NewMemory()
	now := time.Unix(1000, 0)
	c := quota.NewCache(m, time.Second, func() time.Time { return now })
	ctx := t.Context()
	q, err := c.Get(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, quota.Quota{Team: "a"}, q)
	require.NoError(t, m.SetQuota(ctx, quota.Quota{Team: "a", MaxJobs: 3}))
	q, err = c.Get(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, 0, q.MaxJobs, "read again before the TTL")
	now = now.Add(time.Second)
	q, err = c.Get(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, 3, q.MaxJobs)
}

func TestCacheGetFreshReadsThroughAndKeepsWhatItRead(t *testing.T) {
	t.Parallel()
	m := quota.NewMemory()
	now := time.Unix(1000, 0)
	c := quota.NewCache(m, time.Hour, func() time.Time { return now })
	ctx := t.Context()
	require.NoError(t, m.SetQuota(ctx, quota.Quota{Team: "a", MaxJobs: 2}))
	q, err := c.Get(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, 2, q.MaxJobs)
	require.NoError(t, m.SetQuota(ctx, quota.Quota{Team: "a", MaxJobs: 5}))
	q, err = c.GetFresh(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, 5, q.MaxJobs, "a fresh read sees the raised limit at once")
	q, err = c.Get(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, 5, q.MaxJobs, "the cache keeps what the fresh read found")
}

type fixedRuns map[string]int

func (f fixedRuns) TeamSlotsInUse(_ context.Context, team string) (int, error) { return f[team], nil }

func TestUsagesAndCollector(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	m := quota.NewMemory()
	require.NoError(t, m.SetQuota(ctx, quota.Quota{Team: quota.DefaultTeam, MaxJobs: 100}))
	require.NoError(t, m.SetQuota(ctx, quota.Quota{Team: "payments", MaxJobs: 10, MaxConcurrentRuns: 3}))
	require.NoError(t, m.TrackTeamJob(ctx, "payments", "p1", 1))
	require.NoError(t, m.TrackTeamJob(ctx, "search", "s1", 2))
	runs := fixedRuns{"payments": 2}

	all, err := quota.Usages(ctx, m, runs)
	require.NoError(t, err)
	require.Equal(t, []quota.Usage{
		{Quota: quota.Quota{Team: "payments", MaxJobs: 10, MaxConcurrentRuns: 3}, Jobs: 1, ConcurrentRuns: 2},
		{Quota: quota.Quota{Team: quota.DefaultTeam, MaxJobs: 100}, Jobs: -1, ConcurrentRuns: -1},
	}, all)
	one, err := quota.Usages(ctx, m, runs, "search")
	require.NoError(t, err)
	require.Equal(t, []quota.Usage{{Quota: quota.Quota{Team: "search", MaxJobs: 100}, Jobs: 1, ConcurrentRuns: -1}}, one)

	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(quota.NewCollector(m, runs, 0)))
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP sundial_quota_limit A team's quota in force, by quota (max_jobs, max_concurrent_runs, max_runs_per_minute); 0 is unlimited.
# TYPE sundial_quota_limit gauge
sundial_quota_limit{quota="max_concurrent_runs",team="payments"} 3
sundial_quota_limit{quota="max_jobs",team="payments"} 10
sundial_quota_limit{quota="max_runs_per_minute",team="payments"} 0
# HELP sundial_quota_usage What a team uses of a quota: its jobs (max_jobs) and its runs executing now (max_concurrent_runs).
# TYPE sundial_quota_usage gauge
sundial_quota_usage{quota="max_concurrent_runs",team="payments"} 2
sundial_quota_usage{quota="max_jobs",team="payments"} 1
`), "sundial_quota_limit", "sundial_quota_usage"))
}

// flakyLister fails while down is set.
type flakyLister struct {
	down bool
	m    *quota.Memory
}

func (f *flakyLister) ListQuotas(ctx context.Context) ([]quota.Quota, error) {
	if f.down {
		return nil, errors.New("cassandra unreachable")
	}
	return f.m.ListQuotas(ctx)
}

func TestCacheKeepsItsCopyWhenAReadFails(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	src := &flakyLister{down: true, m: quota.NewMemory()}
	require.NoError(t, src.m.SetQuota(ctx, quota.Quota{Team: "a", MaxJobs: 3}))
	now := time.Unix(1000, 0)
	c := quota.NewCache(src, time.Second, func() time.Time { return now })
	_, err := c.Get(ctx, "a")
	require.ErrorContains(t, err, "read quotas: cassandra unreachable", "a cache that never read reports the error")
	src.down = false
	q, err := c.Get(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, 3, q.MaxJobs)
	src.down = true
	now = now.Add(time.Hour)
	q, err = c.Get(ctx, "a")
	require.NoError(t, err, "the old copy stays in use")
	require.Equal(t, 3, q.MaxJobs)
}
