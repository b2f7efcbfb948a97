package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/store"
)

func testJobUpsertGetDelete(t *testing.T, s store.Store) {
	const shards = 4
	initCluster(t, s, shards)
	ctx := ctxOf(t)

	_, err := s.GetJob(ctx, "billing")
	require.ErrorIs(t, err, store.ErrNotFound)

	next := base.Add(90*time.Second + 123*time.Millisecond)
	out, err := s.UpsertJob(ctx, job("billing", "spec-v1", 10, next))
	require.NoError(t, err)
	assert.Equal(t, store.OutcomeCreated, out)

	got, err := s.GetJob(ctx, "billing")
	require.NoError(t, err)
	assert.Equal(t, "billing", got.ID)
	assert.Equal(t, []byte("spec-v1"), got.Spec)
	assert.Equal(t, int64(10), got.Revision)
	assert.Equal(t, store.SpecHash([]byte("spec-v1")), got.Hash)
	assert.True(t, got.NextDue.Equal(next), "next due %v, want %v", got.NextDue, next)
	assert.True(t, got.UpdatedAt.Equal(base.Add(10*time.Second)))
	assert.False(t, got.Deleted)

	entries := dueOf(t, s, "billing", next, shards)
	require.Len(t, entries, 1, "the upsert scheduled the first occurrence")
	assert.Equal(t, store.DueEntry{
		Due: next, JobID: "billing", Kind: store.KindScheduled,
		RunID: store.RunID("billing", next), Attempt: 1, Revision: 10,
		Payload: store.JobSnapshot{Spec: []byte("spec-v1"), UpdatedAt: base.Add(10 * time.Second), CheckedAt: base.Add(10 * time.Second)}.Encode(),
	}, entries[0], "the entry carries the definition's snapshot")

	out, err = s.DeleteJob(ctx, "billing", 11, base.Add(time.Hour))
	require.NoError(t, err)
	assert.Equal(t, store.OutcomeDeleted, out)
	got, err = s.GetJob(ctx, "billing")
	require.NoError(t, err, "a deleted job stays as a tombstone")
	assert.True(t, got.Deleted)
	assert.Equal(t, int64(11), got.Revision)
	assert.Empty(t, got.Spec)
	assert.Empty(t, dueOf(t, s, "billing", next, shards), "the delete removed the pending entry")

	out, err = s.DeleteJob(ctx, "billing", 12, base.Add(time.Hour))
	require.NoError(t, err)
	assert.Equal(t, store.OutcomeUnchanged, out, "deleting twice")

	// Replaying the definition that preceded the delete must not resurrect it.
	out, err = s.UpsertJob(ctx, job("billing", "spec-v1", 10, next))
	require.NoError(t, err)
	assert.Equal(t, store.OutcomeStale, out)
	got, err = s.GetJob(ctx, "billing")
	require.NoError(t, err)
	assert.True(t, got.Deleted)
	assert.Empty(t, dueOf(t, s, "billing", next, shards))

	// A newer definition brings it back.
	out, err = s.UpsertJob(ctx, job("billing", "spec-v1", 13, next))
	require.NoError(t, err)
	assert.Equal(t, store.OutcomeCreated, out)
	got, err = s.GetJob(ctx, "billing")
	require.NoError(t, err)
	assert.False(t, got.Deleted)
	assert.Equal(t, int64(13), got.Revision)
	require.Len(t, dueOf(t, s, "billing", next, shards), 1)

	// A delete of a job never seen leaves a tombstone that blocks older
	// definitions.
	out, err = s.DeleteJob(ctx, "ghost", 5, base)
	require.NoError(t, err)
	assert.Equal(t, store.OutcomeDeleted, out)
	out, err = s.UpsertJob(ctx, job("ghost", "old", 4, next))
	require.NoError(t, err)
	assert.Equal(t, store.OutcomeStale, out)
}

func testIdenticalUpsertIsNoop(t *testing.T, s store.Store) {
	const shards = 4
	initCluster(t, s, shards)
	ctx := ctxOf(t)
	first := base.Add(time.Minute)
	out, err := s.UpsertJob(ctx, job("report", "same", 1, first))
	require.NoError(t, err)
	require.Equal(t, store.OutcomeCreated, out)

	// Replays of the same definition, even with a later revision or a
	// different computed next due, change nothing.
	later := base.Add(5 * time.Minute)
	for _, rev := range []int64{1, 2, 0} {
		out, err = s.UpsertJob(ctx, job("report", "same", rev, later))
		require.NoError(t, err)
		assert.Equal(t, store.OutcomeUnchanged, out, "revision %d", rev)
	}
	got, err := s.GetJob(ctx, "report")
	require.NoError(t, err)
	assert.Equal(t, int64(1), got.Revision)
	assert.True(t, got.NextDue.Equal(first))
	assert.Len(t, dueOf(t, s, "report", first, shards), 1)
	assert.Empty(t, dueOf(t, s, "report", later, shards), "an identical upsert scheduled nothing")
}

func testStaleRevisionIgnored(t *testing.T, s store.Store) {
	const shards = 4
	initCluster(t, s, shards)
	ctx := ctxOf(t)
	t1, t2 := base.Add(time.Minute), base.Add(2*time.Minute)
	_, err := s.UpsertJob(ctx, job("etl", "v2", 20, t2))
	require.NoError(t, err)
	for _, rev := range []int64{10, 20} {
		out, err := s.UpsertJob(ctx, job("etl", "v1", rev, t1))
		require.NoError(t, err)
		assert.Equal(t, store.OutcomeStale, out, "revision %d", rev)
	}
	out, err := s.DeleteJob(ctx, "etl", 19, base)
	require.NoError(t, err)
	assert.Equal(t, store.OutcomeStale, out)

	got, err := s.GetJob(ctx, "etl")
	require.NoError(t, err)
	assert.Equal(t, []byte("v2"), got.Spec)
	assert.False(t, got.Deleted)
	assert.Empty(t, dueOf(t, s, "etl", t1, shards))
	assert.Len(t, dueOf(t, s, "etl", t2, shards), 1)
}

// testReplayedAndReorderedWrites: definitions of one job applied in any
// order, again, or by racing writers leave the job at its highest revision,
// with that revision's occurrence pending; any other entry of the job left
// behind is dead (its revision is not the job's).
func testReplayedAndReorderedWrites(t *testing.T, s store.Store) {
	const shards = 4
	initCluster(t, s, shards)
	ctx := ctxOf(t)
	at := func(rev int64) time.Time { return base.Add(time.Duration(rev) * time.Second) }
	spec := func(rev int64) string { return fmt.Sprintf("v%d", rev) }
	// Every instant is in one bucket: keep the entries due exactly then.
	dueAt := func(id string, due time.Time) []store.DueEntry {
		var out []store.DueEntry
		for _, e := range dueOf(t, s, id, due, shards) {
			if e.Due.Equal(due) {
				out = append(out, e)
			}
		}
		return out
	}

	// In reverse order, then replayed from the start: only the first write,
	// the newest, applies.
	for i, rev := range []int64{30, 20, 10, 10, 20, 30} {
		out, err := s.UpsertJob(ctx, job("reordered", spec(rev), rev, at(rev)))
		require.NoError(t, err)
		want := store.OutcomeStale
		switch {
		case i == 0:
			want = store.OutcomeCreated
		case rev == 30:
			want = store.OutcomeUnchanged
		}
		assert.Equal(t, want, out, "write %d, revision %d", i, rev)
	}
	got, err := s.GetJob(ctx, "reordered")
	require.NoError(t, err)
	assert.Equal(t, int64(30), got.Revision)
	assert.Equal(t, []byte(spec(30)), got.Spec)
	assert.Empty(t, dueAt("reordered", at(10)), "a stale definition schedules nothing")
	assert.Empty(t, dueAt("reordered", at(20)), "a stale definition schedules nothing")
	require.Len(t, dueAt("reordered", at(30)), 1)

	// A delete overtaken by the definition that preceded it.
	out, err := s.DeleteJob(ctx, "reordered", 40, base)
	require.NoError(t, err)
	assert.Equal(t, store.OutcomeDeleted, out)
	out, err = s.UpsertJob(ctx, job("reordered", spec(35), 35, at(35)))
	require.NoError(t, err)
	assert.Equal(t, store.OutcomeStale, out)
	got, err = s.GetJob(ctx, "reordered")
	require.NoError(t, err)
	assert.True(t, got.Deleted, "the replayed definition did not resurrect the job")
	assert.Empty(t, dueAt("reordered", at(35)))

	// Racing writers of every revision at once.
	const revisions = 24
	var wg sync.WaitGroup
	errs := make([]error, revisions+1)
	for rev := int64(revisions); rev >= 1; rev-- {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[rev] = s.UpsertJob(ctx, job("raced", spec(rev), rev, at(rev)))
		}()
	}
	wg.Wait()
	for rev, err := range errs {
		require.NoError(t, err, "revision %d", rev)
	}
	got, err = s.GetJob(ctx, "raced")
	require.NoError(t, err)
	assert.Equal(t, int64(revisions), got.Revision, "the newest revision is in force")
	assert.Equal(t, []byte(spec(revisions)), got.Spec)
	assert.True(t, got.NextDue.Equal(at(revisions)))
	live := 0
	for _, e := range dueOf(t, s, "raced", at(revisions), shards) {
		if e.Revision == got.Revision {
			live++
			assert.True(t, e.Due.Equal(got.NextDue), "the live entry is the job's next due")
		}
	}
	assert.Equal(t, 1, live, "exactly one entry of the job is live")
}

// testUpsertJobsAsOneByOne: UpsertJobs leaves the outcomes and the state
// that UpsertJob of each job in order leaves, including refused jobs and an
// id given twice.
func testUpsertJobsAsOneByOne(t *testing.T, s store.Store) {
	const shards = 4
	initCluster(t, s, shards)
	ctx := ctxOf(t)
	at := func(sec int) time.Time { return base.Add(time.Hour + time.Duration(sec)*time.Second) }
	// Jobs of prefix p: before (stored first), then the batch.
	before := func(p string) []store.Job {
		return []store.Job{
			job(p+"changed", "v1", 1, at(1)),
			job(p+"same", "v1", 2, at(2)),
			job(p+"newer", "v9", 90, at(3)),
			job(p+"deleted", "v1", 3, at(4)),
		}
	}
	batch := func(p string, twice bool) []store.Job {
		jobs := []store.Job{
			job(p+"new", "v1", 100, at(10)),
			job(p+"changed", "v2", 101, at(11)),
			job(p+"same", "v1", 102, at(20)),
			job(p+"newer", "v8", 80, at(13)),
			job(p+"deleted", "v2", 103, at(14)),
			job(p+"paused", "v1", 104, time.Time{}),
			{ID: p + "refused", Revision: 105}, // no spec
		}
		if twice {
			jobs = append(jobs, job(p+"new", "v2", 106, at(16)))
		}
		return jobs
	}
	type state struct {
		outcomes []store.Outcome
		refused  []bool
		jobs     map[string]store.Job
		entries  map[string][]store.DueEntry
	}
	snapshot := func(p string, jobs []store.Job, st *state) {
		st.jobs, st.entries = map[string]store.Job{}, map[string][]store.DueEntry{}
		for _, j := range jobs {
			name := strings.TrimPrefix(j.ID, p)
			got, err := s.GetJob(ctx, j.ID)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			require.NoError(t, err)
			got.ID = name
			st.jobs[name] = got
			for _, sec := range []int{1, 2, 3, 4, 10, 11, 13, 14, 16, 20} {
				for _, e := range dueOf(t, s, j.ID, at(sec), shards) { //nolint:contextcheck // dueOf derives its context from the test's, as ctx is
					if e.Due.Equal(at(sec)) {
						e.JobID, e.RunID = name, strings.TrimPrefix(e.RunID, p)
						st.entries[name] = append(st.entries[name], e)
					}
				}
			}
		}
	}
	for _, twice := range []bool{false, true} {
		one, many := fmt.Sprintf("one-%v-", twice), fmt.Sprintf("many-%v-", twice)
		for _, p := range []string{one, many} {
			for _, j := range before(p) {
				_, err := s.UpsertJob(ctx, j)
				require.NoError(t, err)
			}
			_, err := s.DeleteJob(ctx, p+"deleted", 50, base)
			require.NoError(t, err)
		}
		var want, got state
		for _, j := range batch(one, twice) {
			outcome, err := s.UpsertJob(ctx, j)
			if err != nil {
				require.ErrorIs(t, err, store.ErrInvalid)
			}
			want.outcomes = append(want.outcomes, outcome)
			want.refused = append(want.refused, err != nil)
		}
		results, err := s.UpsertJobs(ctx, batch(many, twice))
		require.NoError(t, err)
		for _, r := range results {
			if r.Err != nil {
				require.ErrorIs(t, r.Err, store.ErrInvalid)
			}
			got.outcomes = append(got.outcomes, r.Outcome)
			got.refused = append(got.refused, r.Err != nil)
		}
		snapshot(one, batch(one, twice), &want)
		snapshot(many, batch(many, twice), &got)
		assert.Equal(t, want, got, "an id given twice: %v", twice)
		assert.Equal(t, []store.Outcome{store.OutcomeCreated, store.OutcomeUpdated, store.OutcomeUnchanged,
			store.OutcomeStale, store.OutcomeCreated, store.OutcomeCreated}, got.outcomes[:6])
	}
}

// testUpsertJobsLargeCall: a call of many definitions, some far larger
// than a batch may be, stores every one (the Cassandra store cuts its
// writes by size); the same call again changes nothing, an older one is
// stale, and a changed one moves every entry.
// GetJobs answers what GetJob answers for each id, over more ids than one
// read of a store that reads them in groups: whole jobs, tombstones
// included, and nothing for an id never stored or asked twice.
func testGetJobsAsOneByOne(t *testing.T, s store.Store) {
	initCluster(t, s, 4)
	ctx := ctxOf(t)
	var ids []string
	for i := range 70 {
		id := fmt.Sprintf("many-%02d", i)
		ids = append(ids, id)
		if i%7 == 3 {
			continue // never stored
		}
		_, err := s.UpsertJob(ctx, job(id, "spec-"+id, int64(10+i), base.Add(time.Duration(i)*time.Minute)))
		require.NoError(t, err)
		if i%5 == 0 {
			_, err := s.DeleteJob(ctx, id, int64(100+i), base.Add(time.Hour))
			require.NoError(t, err)
		}
	}
	got, err := s.GetJobs(ctx, append(ids, ids[0], ids[1]))
	require.NoError(t, err)
	stored := 0
	for _, id := range ids {
		want, err := s.GetJob(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			assert.NotContains(t, got, id)
			continue
		}
		require.NoError(t, err)
		stored++
		require.Contains(t, got, id)
		g := got[id]
		assert.Equal(t, want.Spec, g.Spec, "job %s", id)
		assert.Equal(t, want.Hash, g.Hash, "job %s", id)
		assert.Equal(t, want.Revision, g.Revision, "job %s", id)
		assert.Equal(t, want.Deleted, g.Deleted, "job %s", id)
		assert.True(t, want.UpdatedAt.Equal(g.UpdatedAt), "job %s: updated at %v, want %v", id, g.UpdatedAt, want.UpdatedAt)
		assert.True(t, want.NextDue.Equal(g.NextDue), "job %s: next due %v, want %v", id, g.NextDue, want.NextDue)
	}
	assert.Len(t, got, stored)
	assert.Equal(t, 60, stored, "the test stored 60 of its 70 ids")

	got, err = s.GetJobs(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, got)
}

func testUpsertJobsLargeCall(t *testing.T, s store.Store) {
	const shards = 8
	initCluster(t, s, shards)
	ctx := ctxOf(t)
	sizes := []int{10, 300, 4 << 10, 10 << 10, 60 << 10, 300}
	call := func(rev int64, version string, minutes int) []store.Job {
		var jobs []store.Job
		for i := range 300 {
			spec := version + strings.Repeat("x", sizes[i%len(sizes)])
			due := base.Add(time.Duration(minutes)*time.Minute + time.Duration(i)*time.Second)
			jobs = append(jobs, job(fmt.Sprintf("large-%03d", i), spec, rev+int64(i), due))
		}
		return jobs
	}
	outcomes := func(jobs []store.Job) map[store.Outcome]int {
		res, err := s.UpsertJobs(ctx, jobs)
		require.NoError(t, err)
		n := map[store.Outcome]int{}
		for _, r := range res {
			require.NoError(t, r.Err)
			n[r.Outcome]++
		}
		return n
	}
	check := func(jobs []store.Job) {
		t.Helper()
		for _, j := range jobs {
			got, err := s.GetJob(ctx, j.ID)
			require.NoError(t, err)
			require.Equal(t, j.Spec, got.Spec, "job %s", j.ID)
			require.Equal(t, j.Revision, got.Revision, "job %s", j.ID)
			entries := dueOf(t, s, j.ID, j.NextDue, shards) //nolint:contextcheck // dueOf derives its context from the test's, as ctx is
			require.Len(t, entries, 1, "job %s", j.ID)
			require.Equal(t, j.Revision, entries[0].Revision, "job %s", j.ID)
		}
	}

	v1 := call(1000, "v1", 60)
	assert.Equal(t, map[store.Outcome]int{store.OutcomeCreated: 300}, outcomes(v1))
	check(v1)
	assert.Equal(t, map[store.Outcome]int{store.OutcomeUnchanged: 300}, outcomes(v1), "a replayed call")
	assert.Equal(t, map[store.Outcome]int{store.OutcomeStale: 300}, outcomes(call(1, "v0", 90)), "an older call")
	check(v1)

	v2 := call(2000, "v2", 120)
	assert.Equal(t, map[store.Outcome]int{store.OutcomeUpdated: 300}, outcomes(v2))
	check(v2)
	for _, j := range v1 {
		assert.Empty(t, dueOf(t, s, j.ID, j.NextDue, shards), "the superseded entry of %s", j.ID)
	}
}

// testUpsertAfterEntryWithoutRow: a writer that died between the first
// occurrence and the row left the entry alone; the definition applied
// again creates the job with that very entry, once.
func testUpsertAfterEntryWithoutRow(t *testing.T, s store.Store) {
	const shards = 4
	initCluster(t, s, shards)
	ctx := ctxOf(t)
	next := base.Add(time.Hour)
	var jobs []store.Job
	for i := range 20 {
		jobs = append(jobs, job(fmt.Sprintf("orphan-%02d", i), "v1", 7, next))
	}
	for _, j := range jobs[:10] {
		j.UpdatedAt = store.Truncate(j.UpdatedAt)
		require.NoError(t, s.PutDue(ctx, j.ScheduledEntry()))
	}
	res, err := s.UpsertJobs(ctx, jobs)
	require.NoError(t, err)
	for i, r := range res {
		require.NoError(t, r.Err)
		assert.Equal(t, store.OutcomeCreated, r.Outcome, "job %s", jobs[i].ID)
		entries := dueOf(t, s, jobs[i].ID, next, shards)
		require.Len(t, entries, 1, "job %s", jobs[i].ID)
		assert.Equal(t, jobs[i].ScheduledEntry().Key(), entries[0].Key())
	}
}

func testChangedScheduleMovesDueEntry(t *testing.T, s store.Store) {
	const shards = 4
	initCluster(t, s, shards)
	ctx := ctxOf(t)
	t1 := base.Add(time.Minute + 500*time.Millisecond)
	t2 := base.Add(3 * time.Minute)

	_, err := s.UpsertJob(ctx, job("sync", "every 10m", 1, t1))
	require.NoError(t, err)
	out, err := s.UpsertJob(ctx, job("sync", "every 30m", 2, t2))
	require.NoError(t, err)
	assert.Equal(t, store.OutcomeUpdated, out)

	assert.Empty(t, dueOf(t, s, "sync", t1, shards), "the old occurrence must not fire too")
	moved := dueOf(t, s, "sync", t2, shards)
	require.Len(t, moved, 1)
	assert.Equal(t, int64(2), moved[0].Revision)
	assert.Equal(t, store.RunID("sync", t2), moved[0].RunID)

	// A changed spec with the same next due keeps (rewrites) the entry.
	out, err = s.UpsertJob(ctx, job("sync", "every 30m, new target", 3, t2))
	require.NoError(t, err)
	assert.Equal(t, store.OutcomeUpdated, out)
	same := dueOf(t, s, "sync", t2, shards)
	require.Len(t, same, 1)
	assert.Equal(t, int64(3), same[0].Revision)

	// A definition with no next occurrence removes the pending one.
	_, err = s.UpsertJob(ctx, job("sync", "paused", 4, time.Time{}))
	require.NoError(t, err)
	assert.Empty(t, dueOf(t, s, "sync", t2, shards))
	got, err := s.GetJob(ctx, "sync")
	require.NoError(t, err)
	assert.True(t, got.NextDue.IsZero())
}

func testJobValidation(t *testing.T, s store.Store) {
	initCluster(t, s, 4)
	ctx := ctxOf(t)
	_, err := s.UpsertJob(ctx, store.Job{})
	require.ErrorIs(t, err, store.ErrInvalid)
	for _, field := range []string{"job id", "spec", "updated at"} {
		assert.ErrorContains(t, err, field)
	}
	_, err = s.UpsertJob(ctx, store.Job{ID: "x", Spec: []byte("s"), Revision: -1, UpdatedAt: base})
	require.ErrorIs(t, err, store.ErrInvalid)
	assert.ErrorContains(t, err, "revision")
	_, err = s.DeleteJob(ctx, "", 1, base)
	require.ErrorIs(t, err, store.ErrInvalid)
}

func testUpsertRecordsNextDue(t *testing.T, s store.Store) {
	initCluster(t, s, 4)
	ctx := ctxOf(t)
	next := base.Add(time.Hour)
	_, err := s.UpsertJob(ctx, job("weekly", "v1", 1, next))
	require.NoError(t, err)
	sum, err := s.JobSummary(ctx, "weekly")
	require.NoError(t, err)
	assert.True(t, sum.NextDue.Equal(next), "next due %v", sum.NextDue)
	assert.Nil(t, sum.LastRun)

	// A changed schedule replaces the plan.
	moved := base.Add(2 * time.Hour)
	_, err = s.UpsertJob(ctx, job("weekly", "v2", 2, moved))
	require.NoError(t, err)
	sum, err = s.JobSummary(ctx, "weekly")
	require.NoError(t, err)
	assert.True(t, sum.NextDue.Equal(moved), "next due %v", sum.NextDue)
}

// testPlannedRunFromJob: a stored definition's planned first attempt is
// listed as a scheduled record until the attempt's own history replaces
// it, follows the definition when it changes, and goes with it.
func testPlannedRunFromJob(t *testing.T, s store.Store) {
	initCluster(t, s, 4)
	ctx := ctxOf(t)
	first := base.Add(time.Hour)
	_, err := s.UpsertJob(ctx, job("daily", "v1", 1, first))
	require.NoError(t, err)
	planned := store.RunRecord{
		JobID: "daily", RunID: store.RunID("daily", first), Attempt: 1, Due: first, AttemptDue: first,
		State: store.StateScheduled, UpdatedAt: base.Add(time.Second),
	}
	got, err := s.ListRuns(ctx, "daily", 10)
	require.NoError(t, err)
	assert.Equal(t, []store.RunRecord{planned}, got)

	// Older runs list after it, and the limit counts it.
	older := run("daily", base, 1, store.StateSucceeded, base.Add(time.Second))
	older.AttemptDue = base
	require.NoError(t, s.RecordRun(ctx, older))
	got, err = s.ListRuns(ctx, "daily", 10)
	require.NoError(t, err)
	assert.Equal(t, []store.RunRecord{planned, older}, got)
	got, err = s.ListRuns(ctx, "daily", 1)
	require.NoError(t, err)
	assert.Equal(t, []store.RunRecord{planned}, got)

	// A changed definition plans another attempt: only its plan is listed.
	moved := base.Add(2 * time.Hour)
	_, err = s.UpsertJob(ctx, job("daily", "v2", 2, moved))
	require.NoError(t, err)
	got, err = s.ListRuns(ctx, "daily", 10)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, store.RunID("daily", moved), got[0].RunID)
	assert.Equal(t, store.StateScheduled, got[0].State)

	// The attempt's own history replaces the plan.
	started := run("daily", moved, 1, store.StateRunning, moved.Add(time.Second))
	started.AttemptDue = moved
	require.NoError(t, s.RecordRun(ctx, started))
	got, err = s.ListRuns(ctx, "daily", 10)
	require.NoError(t, err)
	assert.Equal(t, []store.RunRecord{started, older}, got)
	sum, err := s.JobSummary(ctx, "daily")
	require.NoError(t, err)
	assert.True(t, sum.NextDue.IsZero(), "next due %v", sum.NextDue)

	// A paused definition plans nothing; a deleted job neither.
	_, err = s.UpsertJob(ctx, job("paused", "v1", 1, time.Time{}))
	require.NoError(t, err)
	got, err = s.ListRuns(ctx, "paused", 10)
	require.NoError(t, err)
	assert.Empty(t, got)
	_, err = s.UpsertJob(ctx, job("gone", "v1", 1, first))
	require.NoError(t, err)
	_, err = s.DeleteJob(ctx, "gone", 2, base)
	require.NoError(t, err)
	got, err = s.ListRuns(ctx, "gone", 10)
	require.NoError(t, err)
	assert.Empty(t, got)
	sum, err = s.JobSummary(ctx, "gone")
	require.NoError(t, err)
	assert.Equal(t, store.Summary{JobID: "gone"}, sum)
}

// testJobListing pages through live jobs and tombstones with a page smaller
// than the listing, and checks that every live job comes exactly once.
func testJobListing(t *testing.T, s store.Store) {
	initCluster(t, s, 4)
	ctx := ctxOf(t)

	_, err := s.ListJobs(ctx, "", 0)
	require.ErrorIs(t, err, store.ErrInvalid, "limit 0")

	empty, err := s.ListJobs(ctx, "", 3)
	require.NoError(t, err)
	assert.Empty(t, empty.Jobs)
	assert.Empty(t, empty.Next, "an empty store has one page")

	var want []string
	for i := range 11 {
		id := fmt.Sprintf("list-%02d", i)
		_, err := s.UpsertJob(ctx, job(id, "spec-"+id, 1, time.Time{}))
		require.NoError(t, err)
		if i%4 == 0 {
			_, err := s.DeleteJob(ctx, id, 2, base.Add(time.Hour))
			require.NoError(t, err)
			continue
		}
		want = append(want, id)
	}

	var got []string
	after, pages := "", 0
	for {
		page, err := s.ListJobs(ctx, after, 3)
		require.NoError(t, err)
		pages++
		require.LessOrEqual(t, len(page.Jobs), 3, "page %d", pages)
		for _, j := range page.Jobs {
			assert.False(t, j.Deleted, "tombstone %s listed", j.ID)
			assert.Equal(t, []byte("spec-"+j.ID), j.Spec, "spec of %s", j.ID)
			assert.Equal(t, int64(1), j.Revision, "revision of %s", j.ID)
			got = append(got, j.ID)
		}
		if page.Next == "" {
			break
		}
		require.Less(t, pages, 20, "listing does not end; last cursor %q", page.Next)
		after = page.Next
	}
	assert.GreaterOrEqual(t, pages, 4, "11 rows in pages of 3")
	assert.ElementsMatch(t, want, got, "every live job exactly once")
}
