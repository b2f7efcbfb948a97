package quota_test

import (
	"testing"
	"time"

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
	rows := []quota.Quota{{Team: quota.DefaultTeam, MaxJobs: 100, MaxConcurrentRuns: 5}, {Team: "payments", MaxJobs: 1000}}
	tests := []struct {
		name string
		rows []quota.Quota
		team string
		want quota.Quota
	}{
		{"own row", rows, "payments", quota.Quota{Team: "payments", MaxJobs: 1000}},
		{"default row", rows, "search", quota.Quota{Team: "search", MaxJobs: 100, MaxConcurrentRuns: 5}},
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
