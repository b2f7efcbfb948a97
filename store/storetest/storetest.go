// Package storetest is the conformance suite of store.Store. Every
// implementation runs it from its own tests:
//
//	storetest.Run(t, func(t *testing.T) store.Store { ... })
//
// The factory is called once per case and must return an empty, migrated
// store that the case may initialise with its own shard count; cases run in
// parallel, so stores must not share state. The suite states in tests what
// the store package's doc promises in prose.
package storetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/store"
)

// Factory returns a fresh store for one test case.
type Factory func(t *testing.T) store.Store

// base is a fixed, minute-aligned instant the cases build times from.
var base = time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)

// BucketEntries is the size of the large-bucket case.
const BucketEntries = 10_000

// Run runs every conformance case against stores made by newStore.
func Run(t *testing.T, newStore Factory) {
	cases := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"ClusterInit", testClusterInit},
		{"NotInitialized", testNotInitialized},
		{"JobUpsertGetDelete", testJobUpsertGetDelete},
		{"IdenticalUpsertIsNoop", testIdenticalUpsertIsNoop},
		{"StaleRevisionIgnored", testStaleRevisionIgnored},
		{"ReplayedAndReorderedWrites", testReplayedAndReorderedWrites},
		{"UpsertJobsAsOneByOne", testUpsertJobsAsOneByOne},
		{"UpsertJobsLargeCall", testUpsertJobsLargeCall},
		{"GetJobsAsOneByOne", testGetJobsAsOneByOne},
		{"UpsertAfterEntryWithoutRow", testUpsertAfterEntryWithoutRow},
		{"ChangedScheduleMovesDueEntry", testChangedScheduleMovesDueEntry},
		{"JobValidation", testJobValidation},
		{"JobListing", testJobListing},
		{"LargeBucket", testLargeBucket},
		{"BucketIsolation", testBucketIsolation},
		{"DueEntryRoundTrip", testDueEntryRoundTrip},
		{"DeleteDue", testDeleteDue},
		{"DueValidation", testDueValidation},
		{"ClaimRace", testClaimRace},
		{"ClaimRounds", testClaimRounds},
		{"StaleEpochCannotAdvance", testStaleEpochCannotAdvance},
		{"WatermarkMonotonic", testWatermarkMonotonic},
		{"ShardValidation", testShardValidation},
		{"RunHistoryOrder", testRunHistoryOrder},
		{"RunHistoryNoRegression", testRunHistoryNoRegression},
		{"RunHistorySameMillisecond", testRunHistorySameMillisecond},
		{"RunHistoryLog", testRunHistoryLog},
		{"RunSummary", testRunSummary},
		{"UpsertRecordsNextDue", testUpsertRecordsNextDue},
		{"PlannedRunFromJob", testPlannedRunFromJob},
		{"TriggerDedupe", testTriggerDedupe},
		{"DagPutGetDelete", testDagPutGetDelete},
		{"DagRunCreateOnce", testDagRunCreateOnce},
		{"DagRunConditionalUpdate", testDagRunConditionalUpdate},
		{"DagRunListing", testDagRunListing},
		{"DagRunActive", testDagRunActive},
		{"DagValidation", testDagValidation},
		{"HeldEntries", testHeldEntries},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, newStore(t))
		})
	}
}

func ctxOf(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func initCluster(t *testing.T, s store.Store, shards int) {
	t.Helper()
	_, err := s.InitCluster(ctxOf(t), shards)
	require.NoError(t, err)
}

// jobsInShard returns n job ids with the given prefix that all fall in shard.
func jobsInShard(prefix string, shard, shards, n int) []string {
	ids := make([]string, 0, n)
	for i := 0; len(ids) < n; i++ {
		id := fmt.Sprintf("%s-%06d", prefix, i)
		if store.ShardOf(id, shards) == shard {
			ids = append(ids, id)
		}
	}
	return ids
}

// list drains ListBucket.
func list(t *testing.T, s store.Store, bucket time.Time, shard int) []store.DueEntry {
	t.Helper()
	var out []store.DueEntry
	for e, err := range s.ListBucket(ctxOf(t), bucket, shard) {
		require.NoError(t, err)
		out = append(out, e)
	}
	return out
}

// dueOf returns the entries of one job in the bucket of due.
func dueOf(t *testing.T, s store.Store, jobID string, due time.Time, shards int) []store.DueEntry {
	t.Helper()
	var out []store.DueEntry
	for _, e := range list(t, s, store.BucketOf(due), store.ShardOf(jobID, shards)) {
		if e.JobID == jobID {
			out = append(out, e)
		}
	}
	return out
}

func job(id string, spec string, rev int64, next time.Time) store.Job {
	return store.Job{ID: id, Spec: []byte(spec), Revision: rev, UpdatedAt: base.Add(time.Duration(rev) * time.Second), NextDue: next}
}

func testClusterInit(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	_, err := s.GetClusterConfig(ctx)
	require.ErrorIs(t, err, store.ErrNotInitialized)

	_, err = s.InitCluster(ctx, 0)
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = s.InitCluster(ctx, -3)
	require.ErrorIs(t, err, store.ErrInvalid)

	first, err := s.InitCluster(ctx, 8)
	require.NoError(t, err)
	assert.Equal(t, 8, first.Shards)
	assert.False(t, first.CreatedAt.IsZero())

	again, err := s.InitCluster(ctx, 8)
	require.NoError(t, err, "a second init with the same count is idempotent")
	assert.Equal(t, first.Shards, again.Shards)
	assert.True(t, first.CreatedAt.Equal(again.CreatedAt), "the second init keeps the first one's creation time")

	_, err = s.InitCluster(ctx, 16)
	require.ErrorIs(t, err, store.ErrShardCountMismatch)
	var sce *store.ShardCountError
	require.ErrorAs(t, err, &sce)
	assert.Equal(t, store.ShardCountError{Stored: 8, Requested: 16}, *sce)

	got, err := s.GetClusterConfig(ctx)
	require.NoError(t, err)
	assert.Equal(t, 8, got.Shards, "the conflicting init changed nothing")
}

func testNotInitialized(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	e := store.DueEntry{Due: base, JobID: "j", Kind: store.KindTrigger, RunID: "j@1", Attempt: 1}
	require.ErrorIs(t, s.PutDue(ctx, e), store.ErrNotInitialized)
	_, err := s.UpsertJob(ctx, job("j", "spec", 1, base))
	require.ErrorIs(t, err, store.ErrNotInitialized)
	_, err = s.ClaimShard(ctx, 0, "me", 0)
	require.ErrorIs(t, err, store.ErrNotInitialized)
	for _, err := range s.ListBucket(ctx, base, 0) {
		require.ErrorIs(t, err, store.ErrNotInitialized)
	}
}

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

// testLargeBucket writes BucketEntries entries into one partition and reads
// them back: the exact set, in clustering order, with nothing from the
// neighbouring partitions.
func testLargeBucket(t *testing.T, s store.Store) {
	const shards, shard = 16, 5
	initCluster(t, s, shards)
	ctx := ctxOf(t)
	bucket := base.Add(7 * time.Minute)
	ids := jobsInShard("bulk", shard, shards, BucketEntries/4)
	kinds := []store.Kind{store.KindScheduled, store.KindRetry, store.KindTrigger, store.KindDAG}
	want := make([]store.DueEntry, 0, BucketEntries)
	for i := range BucketEntries {
		id := ids[i%len(ids)]
		due := bucket.Add(time.Duration(i*7919%60_000) * time.Millisecond)
		want = append(want, store.DueEntry{
			Due: due, JobID: id, Kind: kinds[i/len(ids)], RunID: store.RunID(id, due),
			Attempt: 1 + i%3, Revision: int64(i),
		})
	}
	// Neighbours: same shard in the next bucket, the same bucket in the
	// next shard.
	other := jobsInShard("bulk", shard+1, shards, 1)[0]
	neighbours := []store.DueEntry{
		{Due: bucket.Add(time.Minute), JobID: ids[0], Kind: store.KindTrigger, RunID: "n1", Attempt: 1},
		{Due: bucket.Add(-time.Millisecond), JobID: ids[0], Kind: store.KindTrigger, RunID: "n2", Attempt: 1},
		{Due: bucket.Add(time.Second), JobID: other, Kind: store.KindTrigger, RunID: "n3", Attempt: 1},
	}
	require.NoError(t, s.PutDue(ctx, neighbours...))

	start := time.Now()
	require.NoError(t, s.PutDue(ctx, want...))
	wrote := time.Since(start)

	start = time.Now()
	got := list(t, s, bucket, shard)
	read := time.Since(start)
	t.Logf("%s: wrote %d due entries into one bucket in %v (%.0f entries/s), read them back in %v (%.0f entries/s)",
		t.Name(), len(want), wrote.Round(time.Millisecond), float64(len(want))/wrote.Seconds(),
		read.Round(time.Millisecond), float64(len(got))/read.Seconds())

	require.Len(t, got, len(want))
	slices.SortFunc(want, compareEntries)
	assert.True(t, slices.IsSortedFunc(got, compareEntries), "entries come in clustering order")
	for i := range want {
		if !assert.Equal(t, want[i], got[i], "entry %d", i) {
			break
		}
	}
}

// compareEntries is the clustering order of due entries.
func compareEntries(a, b store.DueEntry) int {
	return cmp.Or(a.Due.Compare(b.Due), cmp.Compare(a.JobID, b.JobID), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.RunID, b.RunID))
}

func testBucketIsolation(t *testing.T, s store.Store) {
	const shards = 8
	initCluster(t, s, shards)
	ctx := ctxOf(t)
	a := jobsInShard("iso", 2, shards, 1)[0]
	b := jobsInShard("iso", 3, shards, 1)[0]
	bucket := base.Add(time.Hour)
	entries := []store.DueEntry{
		{Due: bucket, JobID: a, Kind: store.KindTrigger, RunID: "first-ms", Attempt: 1},
		{Due: bucket.Add(59_999 * time.Millisecond), JobID: a, Kind: store.KindTrigger, RunID: "last-ms", Attempt: 1},
		{Due: bucket.Add(time.Minute), JobID: a, Kind: store.KindTrigger, RunID: "next-bucket", Attempt: 1},
		{Due: bucket.Add(-time.Millisecond), JobID: a, Kind: store.KindTrigger, RunID: "previous-bucket", Attempt: 1},
		{Due: bucket.Add(time.Second), JobID: b, Kind: store.KindTrigger, RunID: "other-shard", Attempt: 1},
	}
	require.NoError(t, s.PutDue(ctx, entries...))

	runIDs := func(es []store.DueEntry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.RunID)
		}
		return out
	}
	assert.Equal(t, []string{"first-ms", "last-ms"}, runIDs(list(t, s, bucket, 2)))
	// Any instant inside the minute names the same bucket.
	assert.Equal(t, []string{"first-ms", "last-ms"}, runIDs(list(t, s, bucket.Add(30*time.Second), 2)))
	assert.Equal(t, []string{"next-bucket"}, runIDs(list(t, s, bucket.Add(time.Minute), 2)))
	assert.Equal(t, []string{"previous-bucket"}, runIDs(list(t, s, bucket.Add(-time.Minute), 2)))
	assert.Equal(t, []string{"other-shard"}, runIDs(list(t, s, bucket, 3)))
	assert.Empty(t, list(t, s, bucket, 4))
	assert.Empty(t, list(t, s, bucket.Add(2*time.Minute), 2))
}

func testDueEntryRoundTrip(t *testing.T, s store.Store) {
	const shards = 4
	initCluster(t, s, shards)
	ctx := ctxOf(t)
	// A due time in another zone with sub-millisecond digits comes back in
	// UTC at millisecond precision.
	zone := time.FixedZone("UTC+5", 5*3600)
	due := base.Add(42*time.Second + 7*time.Millisecond + 999*time.Microsecond).In(zone)
	in := store.DueEntry{
		Due: due, JobID: "rt", Kind: store.KindRetry, RunID: "rt@123", Attempt: 3, Revision: 77,
		Payload: []byte{0, 1, 2, 0xff},
	}
	require.NoError(t, s.PutDue(ctx, in))
	// Writing the same key again is idempotent and replaces the fields.
	in.Attempt = 4
	require.NoError(t, s.PutDue(ctx, in))
	got := list(t, s, due, store.ShardOf("rt", shards))
	require.Len(t, got, 1)
	want := in
	want.Due = base.Add(42*time.Second + 7*time.Millisecond)
	assert.Equal(t, want, got[0])
	assert.Equal(t, time.UTC, got[0].Due.Location())

	// The same job and due time under another kind or run id is another entry.
	require.NoError(t, s.PutDue(ctx,
		store.DueEntry{Due: due, JobID: "rt", Kind: store.KindTrigger, RunID: "rt@123", Attempt: 1},
		store.DueEntry{Due: due, JobID: "rt", Kind: store.KindRetry, RunID: "rt@124", Attempt: 1},
	))
	assert.Len(t, list(t, s, due, store.ShardOf("rt", shards)), 3)

	// An empty payload reads back as empty, whatever the backend stores.
	require.NoError(t, s.PutDue(ctx, store.DueEntry{Due: due, JobID: "rt", Kind: store.KindDAG, RunID: "d", Attempt: 1}))
	for _, e := range list(t, s, due, store.ShardOf("rt", shards)) {
		if e.Kind == store.KindDAG {
			assert.Empty(t, e.Payload)
		}
	}
}

func testDeleteDue(t *testing.T, s store.Store) {
	const shards = 4
	initCluster(t, s, shards)
	ctx := ctxOf(t)
	ids := jobsInShard("del", 1, shards, 3)
	bucket := base.Add(10 * time.Minute)
	var entries []store.DueEntry
	for i, id := range ids {
		due := bucket.Add(time.Duration(i) * time.Second)
		entries = append(entries, store.DueEntry{Due: due, JobID: id, Kind: store.KindScheduled, RunID: store.RunID(id, due), Attempt: 1})
	}
	require.NoError(t, s.PutDue(ctx, entries...))
	missing := store.DueKey{Due: bucket, JobID: "nobody", Kind: store.KindRetry, RunID: "none"}
	require.NoError(t, s.DeleteDue(ctx, entries[1].Key(), missing))
	got := list(t, s, bucket, 1)
	assert.Equal(t, []store.DueEntry{entries[0], entries[2]}, got)

	// Deleting under another kind or run id leaves the entry alone.
	k := entries[0].Key()
	k.Kind = store.KindRetry
	require.NoError(t, s.DeleteDue(ctx, k))
	assert.Len(t, list(t, s, bucket, 1), 2)

	require.NoError(t, s.DeleteBucket(ctx, bucket, 1))
	assert.Empty(t, list(t, s, bucket, 1))
	// The partition stays writable after a partition delete.
	require.NoError(t, s.PutDue(ctx, entries[1]))
	assert.Equal(t, []store.DueEntry{entries[1]}, list(t, s, bucket, 1))
}

func testDueValidation(t *testing.T, s store.Store) {
	initCluster(t, s, 4)
	ctx := ctxOf(t)
	err := s.PutDue(ctx, store.DueEntry{Kind: "weekly", Attempt: 0, Revision: -1})
	require.ErrorIs(t, err, store.ErrInvalid)
	for _, field := range []string{"due", "job id", "kind", "run id", "attempt", "revision"} {
		assert.ErrorContains(t, err, field)
	}
	require.ErrorIs(t, s.DeleteDue(ctx, store.DueKey{}), store.ErrInvalid)
	for _, shard := range []int{-1, 4} {
		for _, err := range s.ListBucket(ctx, base, shard) {
			require.ErrorIs(t, err, store.ErrInvalid)
		}
		require.ErrorIs(t, s.DeleteBucket(ctx, base, shard), store.ErrInvalid)
	}
}

// testClaimRace has two claimants read the same epoch and claim at once:
// exactly one wins; the loser can re-read and take over.
func testClaimRace(t *testing.T, s store.Store) {
	initCluster(t, s, 4)
	ctx := ctxOf(t)
	st, err := s.GetShard(ctx, 3)
	require.NoError(t, err)
	assert.Equal(t, store.ShardState{Shard: 3}, st, "a shard never claimed")

	epochs, errs := race(ctx, s, 3, st.Epoch, "a", "b")
	winner, loser := -1, -1
	for i := range errs {
		if errs[i] == nil {
			winner = i
		} else {
			require.ErrorIs(t, errs[i], store.ErrEpochConflict)
			loser = i
		}
	}
	require.NotEqual(t, -1, winner, "one claimant wins")
	require.NotEqual(t, -1, loser, "the other loses")
	assert.Equal(t, int64(1), epochs[winner])

	st, err = s.GetShard(ctx, 3)
	require.NoError(t, err)
	assert.Equal(t, int64(1), st.Epoch)
	assert.Equal(t, []string{"a", "b"}[winner], st.Owner)
	assert.False(t, st.ClaimedAt.IsZero())

	// The loser re-reads and takes over.
	loserName := []string{"a", "b"}[loser]
	e, err := s.ClaimShard(ctx, 3, loserName, st.Epoch)
	require.NoError(t, err)
	assert.Equal(t, int64(2), e)
	st, err = s.GetShard(ctx, 3)
	require.NoError(t, err)
	assert.Equal(t, loserName, st.Owner)

	// Other shards are untouched.
	other, err := s.GetShard(ctx, 2)
	require.NoError(t, err)
	assert.Equal(t, int64(0), other.Epoch)
}

// race runs ClaimShard for each owner at once, all having seen epoch seen.
func race(ctx context.Context, s store.Store, shard int, seen int64, owners ...string) ([]int64, []error) {
	epochs := make([]int64, len(owners))
	errs := make([]error, len(owners))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, owner := range owners {
		wg.Go(func() {
			<-start
			epochs[i], errs[i] = s.ClaimShard(ctx, shard, owner, seen)
		})
	}
	close(start)
	wg.Wait()
	return epochs, errs
}

// testClaimRounds races several claimants for several rounds: every round has
// exactly one winner and the epoch counts the rounds.
func testClaimRounds(t *testing.T, s store.Store) {
	initCluster(t, s, 4)
	ctx := ctxOf(t)
	owners := []string{"d1", "d2", "d3", "d4"}
	const rounds = 5
	for round := range rounds {
		st, err := s.GetShard(ctx, 0)
		require.NoError(t, err)
		require.Equal(t, int64(round), st.Epoch)
		epochs, errs := race(ctx, s, 0, st.Epoch, owners...)
		wins := 0
		for i, err := range errs {
			if err == nil {
				wins++
				assert.Equal(t, st.Epoch+1, epochs[i])
				continue
			}
			require.ErrorIs(t, err, store.ErrEpochConflict, "round %d claimant %s", round, owners[i])
		}
		require.Equal(t, 1, wins, "round %d", round)
	}
	_, err := s.ClaimShard(ctx, 0, "late", 2)
	require.ErrorIs(t, err, store.ErrEpochConflict, "a claim with an epoch read long ago")
	_, err = s.ClaimShard(ctx, 0, "future", rounds+1)
	require.ErrorIs(t, err, store.ErrEpochConflict, "a claim with an epoch that never existed")
}

func testStaleEpochCannotAdvance(t *testing.T, s store.Store) {
	initCluster(t, s, 4)
	ctx := ctxOf(t)
	old, err := s.ClaimShard(ctx, 1, "old", 0)
	require.NoError(t, err)
	w1 := base.Add(time.Minute)
	require.NoError(t, s.AdvanceWatermark(ctx, 1, old, w1))

	next, err := s.ClaimShard(ctx, 1, "new", old)
	require.NoError(t, err)
	require.Greater(t, next, old)

	err = s.AdvanceWatermark(ctx, 1, old, base.Add(2*time.Minute))
	require.ErrorIs(t, err, store.ErrStaleEpoch, "the fenced owner cannot advance")
	st, err := s.GetShard(ctx, 1)
	require.NoError(t, err)
	assert.True(t, st.Watermark.Equal(w1), "the claim kept the watermark and the stale advance did nothing: %v", st.Watermark)
	assert.Equal(t, "new", st.Owner)
	assert.Equal(t, next, st.Epoch)

	require.NoError(t, s.AdvanceWatermark(ctx, 1, next, base.Add(3*time.Minute)))
	require.ErrorIs(t, s.AdvanceWatermark(ctx, 1, next+1, base.Add(4*time.Minute)), store.ErrStaleEpoch, "an epoch nobody claimed")
	require.ErrorIs(t, s.AdvanceWatermark(ctx, 2, 1, base.Add(4*time.Minute)), store.ErrStaleEpoch, "a shard never claimed")
}

func testWatermarkMonotonic(t *testing.T, s store.Store) {
	initCluster(t, s, 4)
	ctx := ctxOf(t)
	e, err := s.ClaimShard(ctx, 2, "me", 0)
	require.NoError(t, err)
	watermark := func() time.Time {
		st, err := s.GetShard(ctx, 2)
		require.NoError(t, err)
		return st.Watermark
	}
	assert.True(t, watermark().IsZero())

	t1 := base.Add(time.Minute + 250*time.Millisecond)
	t2 := base.Add(2 * time.Minute)
	require.NoError(t, s.AdvanceWatermark(ctx, 2, e, t1))
	assert.True(t, watermark().Equal(t1))
	require.NoError(t, s.AdvanceWatermark(ctx, 2, e, t2))
	assert.True(t, watermark().Equal(t2))
	require.NoError(t, s.AdvanceWatermark(ctx, 2, e, t1), "an older watermark is not an error")
	assert.True(t, watermark().Equal(t2), "but does not move it back")
	require.NoError(t, s.AdvanceWatermark(ctx, 2, e, t2))
	assert.True(t, watermark().Equal(t2))
	require.ErrorIs(t, s.AdvanceWatermark(ctx, 2, e, time.Time{}), store.ErrInvalid)

	// Under concurrent advances from the owner the highest wins.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			assert.NoError(t, s.AdvanceWatermark(ctx, 2, e, t2.Add(time.Duration(i)*time.Second)))
		})
	}
	wg.Wait()
	assert.True(t, watermark().Equal(t2.Add(7*time.Second)), "watermark %v", watermark())
}

func testShardValidation(t *testing.T, s store.Store) {
	initCluster(t, s, 4)
	ctx := ctxOf(t)
	for _, shard := range []int{-1, 4, 100} {
		_, err := s.GetShard(ctx, shard)
		require.ErrorIs(t, err, store.ErrInvalid, "shard %d", shard)
		_, err = s.ClaimShard(ctx, shard, "me", 0)
		require.ErrorIs(t, err, store.ErrInvalid, "shard %d", shard)
		require.ErrorIs(t, s.AdvanceWatermark(ctx, shard, 1, base), store.ErrInvalid, "shard %d", shard)
	}
	_, err := s.ClaimShard(ctx, 0, "", 0)
	require.ErrorIs(t, err, store.ErrInvalid)
}

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

func testTriggerDedupe(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	const ttl = time.Hour
	first := base.Add(1500 * time.Microsecond) // stored at millisecond precision
	got, err := s.TriggerDedupe(ctx, "billing", "ticket-1", first, ttl)
	require.NoError(t, err)
	assert.True(t, got.Equal(base.Add(time.Millisecond)), "the first call records its due time: %v", got)

	// The same key again, with another due time: the first one wins.
	got, err = s.TriggerDedupe(ctx, "billing", "ticket-1", base.Add(time.Minute), ttl)
	require.NoError(t, err)
	assert.True(t, got.Equal(base.Add(time.Millisecond)), "a repeated key returns the first due time: %v", got)

	// Keys are per job.
	got, err = s.TriggerDedupe(ctx, "billing", "ticket-2", base.Add(time.Minute), ttl)
	require.NoError(t, err)
	assert.True(t, got.Equal(base.Add(time.Minute)))
	got, err = s.TriggerDedupe(ctx, "payments", "ticket-1", base.Add(2*time.Minute), ttl)
	require.NoError(t, err)
	assert.True(t, got.Equal(base.Add(2*time.Minute)))

	// Racing callers agree on one due time.
	var wg sync.WaitGroup
	results := make([]time.Time, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := s.TriggerDedupe(ctx, "race", "k", base.Add(time.Duration(i)*time.Second), ttl)
			assert.NoError(t, err)
			results[i] = got
		}()
	}
	wg.Wait()
	for _, r := range results {
		assert.True(t, r.Equal(results[0]), "all callers see the winner: %v", results)
	}

	_, err = s.TriggerDedupe(ctx, "", "", time.Time{}, 0)
	require.ErrorIs(t, err, store.ErrInvalid)
	for _, want := range []string{"job id", "idempotency key", "due", "ttl"} {
		assert.ErrorContains(t, err, want)
	}
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
