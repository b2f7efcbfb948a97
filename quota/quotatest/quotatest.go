package quotatest

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/quota"
)

// Run runs the suite. newStore returns a store; team names and job ids
// start with the test's name, so one store may serve every test.
func Run(t *testing.T, newStore func(t *testing.T) quota.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, ctx context.Context, s quota.Store, team string)
	}{
		{"SetAndList", testSetAndList},
		{"SetRefusesBadValues", testSetRefusesBadValues},
		{"CountIsASet", testCountIsASet},
		{"ReplayOfOlderRevisionChangesNothing", testReplayOfOlderRevision},
		{"MoveBetweenTeams", testMoveBetweenTeams},
		{"ManyMovesAsOneByOne", testManyMovesAsOneByOne},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, t.Context(), newStore(t), "t-"+tc.name)
		})
	}
}

func testSetAndList(t *testing.T, ctx context.Context, s quota.Store, team string) {
	require.NoError(t, s.SetQuota(ctx, quota.Quota{Team: team + "-a", MaxJobs: 10, MaxConcurrentRuns: 2}))
	require.NoError(t, s.SetQuota(ctx, quota.Quota{Team: team + "-b", MaxJobs: 5}))
	require.NoError(t, s.SetQuota(ctx, quota.Quota{Team: team + "-a", MaxJobs: 20, MaxConcurrentRuns: 3, MaxRunsPerMinute: 600}))
	rows, err := s.ListQuotas(ctx)
	require.NoError(t, err)
	var mine []quota.Quota
	for _, q := range rows {
		if q.Team == team+"-a" || q.Team == team+"-b" {
			mine = append(mine, q)
		}
	}
	require.Equal(t, []quota.Quota{
		{Team: team + "-a", MaxJobs: 20, MaxConcurrentRuns: 3, MaxRunsPerMinute: 600},
		{Team: team + "-b", MaxJobs: 5},
	}, mine)
	require.Equal(t, quota.Quota{Team: team + "-a", MaxJobs: 20, MaxConcurrentRuns: 3, MaxRunsPerMinute: 600}, quota.Effective(rows, team+"-a"))
}

func testSetRefusesBadValues(t *testing.T, ctx context.Context, s quota.Store, team string) {
	err := s.SetQuota(ctx, quota.Quota{Team: team, MaxJobs: -1, MaxConcurrentRuns: -2, MaxRunsPerMinute: -3})
	require.ErrorContains(t, err, "max_jobs -1")
	require.ErrorContains(t, err, "max_concurrent_runs -2")
	require.ErrorContains(t, err, "max_runs_per_minute -3")
	require.ErrorContains(t, s.SetQuota(ctx, quota.Quota{}), "team: required")
}

func testCountIsASet(t *testing.T, ctx context.Context, s quota.Store, team string) {
	count := func() int {
		n, err := s.CountTeamJobs(ctx, team)
		require.NoError(t, err)
		return n
	}
	require.Equal(t, 0, count())
	for range 2 { // a redelivered record tracks again
		require.NoError(t, s.TrackTeamJob(ctx, team, team+"/job-1", 10))
		require.NoError(t, s.TrackTeamJob(ctx, team, team+"/job-2", 11))
	}
	require.Equal(t, 2, count())
	require.NoError(t, s.TrackTeamJob(ctx, team, team+"/job-1", 12)) // an update
	require.Equal(t, 2, count())
	for range 2 {
		require.NoError(t, s.UntrackTeamJob(ctx, team+"/job-2", 13))
	}
	require.Equal(t, 1, count())
	require.NoError(t, s.UntrackTeamJob(ctx, team+"/never-tracked", 14))
	require.Equal(t, 1, count())
}

func testReplayOfOlderRevision(t *testing.T, ctx context.Context, s quota.Store, team string) {
	require.NoError(t, s.TrackTeamJob(ctx, team, team+"/job-1", 10))
	require.NoError(t, s.UntrackTeamJob(ctx, team+"/job-1", 20))
	require.NoError(t, s.TrackTeamJob(ctx, team, team+"/job-1", 10)) // replay of the create
	n, err := s.CountTeamJobs(ctx, team)
	require.NoError(t, err)
	require.Equal(t, 0, n, "a replayed create brought a deleted job back")

	require.NoError(t, s.TrackTeamJob(ctx, team, team+"/job-1", 30)) // created again
	require.NoError(t, s.UntrackTeamJob(ctx, team+"/job-1", 20))     // replay of the delete
	n, err = s.CountTeamJobs(ctx, team)
	require.NoError(t, err)
	require.Equal(t, 1, n, "a replayed delete removed a newer job")
}

func testMoveBetweenTeams(t *testing.T, ctx context.Context, s quota.Store, team string) {
	a, b := team+"-a", team+"-b"
	require.NoError(t, s.TrackTeamJob(ctx, a, team+"/job-1", 10))
	require.NoError(t, s.TrackTeamJob(ctx, b, team+"/job-1", 11))
	require.NoError(t, s.TrackTeamJob(ctx, a, team+"/job-1", 10)) // replay
	na, err := s.CountTeamJobs(ctx, a)
	require.NoError(t, err)
	nb, err := s.CountTeamJobs(ctx, b)
	require.NoError(t, err)
	require.Equal(t, [2]int{0, 1}, [2]int{na, nb})
}

// testManyMovesAsOneByOne applies moves in one TrackTeamJobs call (more
// than one read group's worth of jobs, moves between teams, untracks,
// replays of older revisions and a job moved twice in the call) and
// checks the counts that the same moves one by one give.
func testManyMovesAsOneByOne(t *testing.T, ctx context.Context, s quota.Store, team string) {
	a, b := team+"-a", team+"-b"
	job := func(i int) string { return fmt.Sprintf("%s/job-%03d", team, i) }
	var first []quota.TeamJob
	for i := range 70 {
		first = append(first, quota.TeamJob{Team: a, JobID: job(i), Revision: 100})
	}
	require.NoError(t, s.TrackTeamJobs(ctx, first))
	count := func(team string) int {
		n, err := s.CountTeamJobs(ctx, team)
		require.NoError(t, err)
		return n
	}
	require.Equal(t, [2]int{70, 0}, [2]int{count(a), count(b)})

	var moves []quota.TeamJob
	for i := range 20 { // jobs 0-19 move to b
		moves = append(moves, quota.TeamJob{Team: b, JobID: job(i), Revision: 200})
	}
	for i := 20; i < 30; i++ { // jobs 20-29 are deleted
		moves = append(moves, quota.TeamJob{JobID: job(i), Revision: 200})
	}
	for i := 30; i < 40; i++ { // replays of an older revision to b: nothing changes
		moves = append(moves, quota.TeamJob{Team: b, JobID: job(i), Revision: 50})
	}
	moves = append(moves,
		quota.TeamJob{Team: b, JobID: job(100), Revision: 200}, // a new job of b
		quota.TeamJob{Team: a, JobID: job(0), Revision: 300},   // job 0 back to a, in the same call
	)
	require.NoError(t, s.TrackTeamJobs(ctx, moves))
	// a: 70 - 20 moved - 10 deleted + job 0 back = 41; b: 20 moved - job 0 + job 100 = 20.
	require.Equal(t, [2]int{41, 20}, [2]int{count(a), count(b)})

	require.NoError(t, s.TrackTeamJobs(ctx, moves[:30])) // a replay of part of the call
	require.Equal(t, [2]int{41, 20}, [2]int{count(a), count(b)})
	require.NoError(t, s.TrackTeamJobs(ctx, nil))
}
