package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/store"
)

func run(jobID string, due time.Time, attempt int, state store.RunState, updated time.Time) store.RunRecord {
	r := store.RunRecord{
		JobID: jobID, RunID: store.RunID(jobID, due), Attempt: attempt, Due: due,
		State: state, UpdatedAt: updated,
	}
	if state != store.StateScheduled {
		r.Started = updated.Add(-time.Second)
	}
	if state == store.StateSucceeded || state == store.StateFailed {
		r.Finished = updated
		r.Duration = time.Second
	}
	if state == store.StateFailed {
		r.Error = "exit status 1"
	}
	return r
}

func testRunHistoryOrder(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	d1, d2, d3 := base, base.Add(time.Minute), base.Add(2*time.Minute)
	records := []store.RunRecord{
		run("nightly", d2, 1, store.StateFailed, d2.Add(time.Second)),
		run("nightly", d1, 1, store.StateSucceeded, d1.Add(time.Second)),
		run("nightly", d2, 2, store.StateSucceeded, d2.Add(5*time.Second)),
		run("nightly", d3, 1, store.StateRunning, d3.Add(time.Second)),
		run("other", d3.Add(time.Minute), 1, store.StateSucceeded, d3.Add(time.Minute)),
	}
	for _, r := range records {
		require.NoError(t, s.RecordRun(ctx, r))
	}
	got, err := s.ListRuns(ctx, "nightly", 10)
	require.NoError(t, err)
	want := []store.RunRecord{records[3], records[2], records[0], records[1]}
	for i := range want {
		want[i] = want[i].Normalize()
	}
	assert.Equal(t, want, got, "newest due first, later attempts first")

	got, err = s.ListRuns(ctx, "nightly", 2)
	require.NoError(t, err)
	assert.Equal(t, want[:2], got)

	got, err = s.ListRuns(ctx, "nobody", 5)
	require.NoError(t, err)
	assert.Empty(t, got)

	_, err = s.ListRuns(ctx, "nightly", 0)
	require.ErrorIs(t, err, store.ErrInvalid)
	err = s.RecordRun(ctx, store.RunRecord{State: "exploded"})
	require.ErrorIs(t, err, store.ErrInvalid)
	for _, field := range []string{"job id", "run id", "attempt", "due", "state", "updated at"} {
		assert.ErrorContains(t, err, field)
	}
}

func testRunHistoryNoRegression(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	due := base.Add(time.Hour)
	done := run("j", due, 1, store.StateSucceeded, due.Add(10*time.Second))
	require.NoError(t, s.RecordRun(ctx, done))
	// A replayed older event arrives after the newer one.
	require.NoError(t, s.RecordRun(ctx, run("j", due, 1, store.StateRunning, due.Add(time.Second))))
	got, err := s.ListRuns(ctx, "j", 10)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, done.Normalize(), got[0])

	// A newer event replaces it, fields it leaves empty included.
	cancelled := run("j", due, 1, store.StateCancelled, due.Add(20*time.Second))
	cancelled.Started = time.Time{}
	require.NoError(t, s.RecordRun(ctx, cancelled))
	got, err = s.ListRuns(ctx, "j", 10)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, cancelled.Normalize(), got[0])
}

// A fast failure writes its running and failed states within one
// millisecond; the later one wins, whatever the states' names.
func testRunHistorySameMillisecond(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	due := base.Add(3 * time.Hour)
	started := due.Add(time.Second + 100*time.Microsecond)
	failed := run("fast", due, 1, store.StateFailed, started.Add(300*time.Microsecond))
	running := run("fast", due, 1, store.StateRunning, started)
	// Written in either order, the failure wins.
	for i, recs := range [][]store.RunRecord{{running, failed}, {failed, running}} {
		job := fmt.Sprintf("fast-%d", i)
		for _, r := range recs {
			r.JobID = job
			require.NoError(t, s.RecordRun(ctx, r))
		}
		got, err := s.ListRuns(ctx, job, 10)
		require.NoError(t, err)
		require.Len(t, got, 1)
		assert.Equal(t, store.StateFailed, got[0].State, "order %d", i)
		assert.Equal(t, "exit status 1", got[0].Error, "order %d", i)
	}

	// RecordRuns orders the records of one attempt the same way, and
	// writes the records of several jobs.
	var batch []store.RunRecord
	for i := range 3 {
		for _, r := range []store.RunRecord{failed, running} {
			r.JobID = fmt.Sprintf("fast-batch-%d", i)
			batch = append(batch, r)
		}
	}
	require.NoError(t, s.RecordRuns(ctx, batch))
	for i := range 3 {
		got, err := s.ListRuns(ctx, fmt.Sprintf("fast-batch-%d", i), 10)
		require.NoError(t, err)
		require.Len(t, got, 1)
		assert.Equal(t, store.StateFailed, got[0].State, "job %d", i)
	}
	// A bad record refuses the whole call.
	err := s.RecordRuns(ctx, []store.RunRecord{run("fast-bad", due, 1, store.StateRunning, started), {JobID: "fast-bad"}})
	require.ErrorIs(t, err, store.ErrInvalid)
	got, err := s.ListRuns(ctx, "fast-bad", 10)
	require.NoError(t, err)
	assert.Empty(t, got)
}

// testRunHistoryLog: an attempt's log lines are stored with its record; a
// newer record with lines replaces them, one without leaves them in place.
func testRunHistoryLog(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	due := base.Add(3 * time.Hour)
	failed := run("logged", due, 1, store.StateFailed, due.Add(time.Second))
	failed.Log = []string{"level=INFO msg=start", `level=ERROR msg="ledger closed"`}
	require.NoError(t, s.RecordRun(ctx, failed))
	got, err := s.ListRuns(ctx, "logged", 10)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, failed.Log, got[0].Log)

	dead := run("logged", due, 1, store.StateFailed, due.Add(2*time.Second))
	dead.Error = "dead: handler_error: ledger closed"
	dead.Log = []string{"level=INFO msg=start", `level=ERROR msg="ledger closed"`, "level=INFO msg=bye"}
	require.NoError(t, s.RecordRun(ctx, dead))
	got, err = s.ListRuns(ctx, "logged", 10)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, dead.Normalize(), got[0])

	later := run("logged", due, 1, store.StateFailed, due.Add(3*time.Second))
	later.Error = "dead: replayed"
	require.NoError(t, s.RecordRun(ctx, later))
	got, err = s.ListRuns(ctx, "logged", 10)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "dead: replayed", got[0].Error)
	assert.Equal(t, dead.Log, got[0].Log, "a record without lines keeps the stored ones")
}

func testRunSummary(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	sum, err := s.JobSummary(ctx, "hourly")
	require.NoError(t, err)
	assert.Equal(t, store.Summary{JobID: "hourly"}, sum, "no history")

	d1, d2, d3 := base, base.Add(time.Hour), base.Add(2*time.Hour)
	for _, r := range []store.RunRecord{
		run("hourly", d1, 1, store.StateSucceeded, d1.Add(time.Second)),
		run("hourly", d2, 1, store.StateFailed, d2.Add(time.Second)),
		run("hourly", d2, 2, store.StateFailed, d2.Add(time.Minute)),
		run("hourly", d3, 1, store.StateScheduled, d2.Add(time.Minute)),
	} {
		require.NoError(t, s.RecordRun(ctx, r))
	}
	sum, err = s.JobSummary(ctx, "hourly")
	require.NoError(t, err)
	require.NotNil(t, sum.LastRun)
	assert.Equal(t, store.RunID("hourly", d2), sum.LastRun.RunID)
	assert.Equal(t, 2, sum.LastRun.Attempt)
	assert.Equal(t, store.StateFailed, sum.LastRun.State)
	assert.True(t, sum.NextDue.Equal(d3), "next due %v", sum.NextDue)
	assert.Equal(t, 2, sum.Runs)
	assert.Equal(t, 3, sum.Attempts)
	assert.Equal(t, 2, sum.Failures)

	// The scheduled run starts: it is the last run and nothing is next.
	require.NoError(t, s.RecordRun(ctx, run("hourly", d3, 1, store.StateRunning, d3.Add(time.Second))))
	sum, err = s.JobSummary(ctx, "hourly")
	require.NoError(t, err)
	assert.Equal(t, store.StateRunning, sum.LastRun.State)
	assert.True(t, sum.NextDue.IsZero())
	assert.Equal(t, 3, sum.Runs)
	assert.Equal(t, 4, sum.Attempts)
}

// testTeamRunIndex: ListTeamRuns lists one team's records of every job, in
// CompareRuns order across hour buckets, within the window, filtered, paged
// after a key; another team's records never appear; a newer record without
// a wait reason or times keeps the stored ones.
func testTeamRunIndex(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	team := func(r store.RunRecord, owner string) store.RunRecord {
		r.OwnerTeam = owner
		return r
	}
	d := base.Truncate(time.Hour)
	a1 := team(run("a-one", d.Add(10*time.Minute), 1, store.StateSucceeded, d.Add(11*time.Minute)), "team-a")
	a1.WaitReason, a1.Dispatched = "no_executor", d.Add(10*time.Minute+time.Second)
	a2 := team(run("a-two", d.Add(70*time.Minute), 1, store.StateFailed, d.Add(71*time.Minute)), "team-a")
	a3 := team(run("a-one", d.Add(130*time.Minute), 1, store.StateRunning, d.Add(131*time.Minute)), "team-a")
	old := team(run("a-two", d.Add(-5*time.Hour), 1, store.StateSucceeded, d.Add(-5*time.Hour)), "team-a")
	b1 := team(run("b-one", d.Add(20*time.Minute), 1, store.StateSucceeded, d.Add(21*time.Minute)), "team-b")
	none := run("nobody", d.Add(30*time.Minute), 1, store.StateSucceeded, d.Add(31*time.Minute))
	require.NoError(t, s.RecordRuns(ctx, []store.RunRecord{a1, a2, a3, old, b1, none}))
	// A newer state of a1 that says no reason and no times keeps them.
	a1later := a1
	a1later.WaitReason, a1later.Dispatched = "", time.Time{}
	a1later.UpdatedAt = a1.UpdatedAt.Add(time.Second)
	require.NoError(t, s.RecordRun(ctx, a1later))

	q := store.TeamRunsQuery{Team: "team-a", From: d.Add(-time.Hour), To: d.Add(3 * time.Hour), Limit: 10}
	got, err := s.ListTeamRuns(ctx, q)
	require.NoError(t, err)
	var ids []string
	for _, r := range got {
		ids = append(ids, r.RunID)
		assert.Equal(t, "team-a", r.OwnerTeam)
	}
	assert.Equal(t, []string{a3.RunID, a2.RunID, a1.RunID}, ids, "newest due first across jobs and hours; the old one is outside the window")
	require.Len(t, got, 3)
	assert.Equal(t, "no_executor", got[2].WaitReason)
	assert.Equal(t, store.Truncate(a1.Dispatched), got[2].Dispatched)

	q.Limit = 2
	page, err := s.ListTeamRuns(ctx, q)
	require.NoError(t, err)
	require.Len(t, page, 2)
	k := store.KeyOf(page[1])
	q.After = &k
	rest, err := s.ListTeamRuns(ctx, q)
	require.NoError(t, err)
	require.Len(t, rest, 1)
	assert.Equal(t, a1.RunID, rest[0].RunID, "the next page starts after the key")

	q = store.TeamRunsQuery{Team: "team-a", From: d.Add(-time.Hour), To: d.Add(3 * time.Hour), Limit: 10,
		Keep: func(r store.RunRecord) bool { return r.State == store.StateFailed }}
	got, err = s.ListTeamRuns(ctx, q)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, a2.RunID, got[0].RunID)

	got, err = s.ListTeamRuns(ctx, store.TeamRunsQuery{Team: "team-b", From: d, To: d.Add(3 * time.Hour), Limit: 10})
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, b1.RunID, got[0].RunID, "a team lists only its own runs")

	_, err = s.ListTeamRuns(ctx, store.TeamRunsQuery{Team: "", From: d, To: d, Limit: 0})
	require.ErrorIs(t, err, store.ErrInvalid)
}
