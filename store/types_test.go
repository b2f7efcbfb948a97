package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/store"
)

func TestShardOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id     string
		shards int
		want   int
	}{
		// FNV-1a 32 of "" is the offset basis 0x811c9dc5 = 2166136261.
		{"", 128, 2166136261 % 128},
		// FNV-1a 32 of "a" is 0xe40c292c = 3826002220.
		{"a", 128, 3826002220 % 128},
		{"a", 7, 3826002220 % 7},
		{"a", 1, 0},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, store.ShardOf(tt.id, tt.shards), "ShardOf(%q, %d)", tt.id, tt.shards)
	}
	assert.Panics(t, func() { store.ShardOf("a", 0) })
}

func TestShardOfSpreads(t *testing.T) {
	t.Parallel()
	const shards, jobs = 16, 16_000
	counts := make([]int, shards)
	for i := range jobs {
		counts[store.ShardOf(fmt.Sprintf("job-%d", i), shards)]++
	}
	for shard, n := range counts {
		assert.InDelta(t, jobs/shards, n, jobs/shards/5, "shard %d holds %d of %d jobs", shard, n, jobs)
	}
}

func TestBucketOf(t *testing.T) {
	t.Parallel()
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	in := time.Date(2030, 5, 6, 7, 8, 59, 999_999_999, zone)
	got := store.BucketOf(in)
	assert.Equal(t, time.Date(2030, 5, 6, 1, 38, 0, 0, time.UTC), got)
	assert.Equal(t, time.UTC, got.Location())
	assert.Equal(t, got, store.BucketOf(got), "a bucket is its own bucket")
}

func TestRunID(t *testing.T) {
	t.Parallel()
	due := time.Date(2030, 1, 1, 0, 0, 0, 123_456_789, time.FixedZone("x", 3600))
	assert.Equal(t, "billing@1893452400123", store.RunID("billing", due))
}

func TestDecideUpsert(t *testing.T) {
	t.Parallel()
	live := &store.Job{ID: "j", Spec: []byte("a"), Hash: store.SpecHash([]byte("a")), Revision: 10}
	dead := &store.Job{ID: "j", Revision: 10, Deleted: true}
	tests := []struct {
		name   string
		stored *store.Job
		spec   string
		rev    int64
		want   store.Outcome
	}{
		{"new", nil, "a", 0, store.OutcomeCreated},
		{"identical newer", live, "a", 11, store.OutcomeUnchanged},
		{"identical older", live, "a", 1, store.OutcomeUnchanged},
		{"changed newer", live, "b", 11, store.OutcomeUpdated},
		{"changed same revision", live, "b", 10, store.OutcomeStale},
		{"changed older", live, "b", 9, store.OutcomeStale},
		{"after delete newer", dead, "a", 11, store.OutcomeCreated},
		{"after delete older", dead, "a", 9, store.OutcomeStale},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := store.DecideUpsert(tt.stored, store.Job{ID: "j", Spec: []byte(tt.spec), Revision: tt.rev})
			assert.Equal(t, tt.want, got)
		})
	}
	assert.Equal(t, store.OutcomeDeleted, store.DecideDelete(nil, 1))
	assert.Equal(t, store.OutcomeDeleted, store.DecideDelete(live, 11))
	assert.Equal(t, store.OutcomeStale, store.DecideDelete(live, 10))
	assert.Equal(t, store.OutcomeUnchanged, store.DecideDelete(dead, 11))
}

func TestSummarizeIgnoresReplacedPlan(t *testing.T) {
	t.Parallel()
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	// Newest due first, as ListRuns returns them: an old definition planned
	// tomorrow, then a new one planned the next hour after the last run.
	recs := []store.RunRecord{
		{RunID: "j@tomorrow", Attempt: 1, AttemptDue: base.Add(24 * time.Hour), State: store.StateScheduled, UpdatedAt: base.Add(time.Minute)},
		{RunID: "j@hour", Attempt: 1, AttemptDue: base.Add(time.Hour), State: store.StateScheduled, UpdatedAt: base.Add(2 * time.Minute)},
		{RunID: "j@0", Attempt: 1, AttemptDue: base, State: store.StateSucceeded, UpdatedAt: base.Add(time.Second)},
	}
	sum := store.Summarize("j", recs)
	require.NotNil(t, sum.LastRun)
	assert.Equal(t, "j@0", sum.LastRun.RunID)
	assert.Equal(t, base.Add(time.Hour), sum.NextDue)
	assert.Equal(t, 1, sum.Runs)
}

func TestOutcomeString(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "unchanged", store.OutcomeUnchanged.String())
	assert.Equal(t, "Outcome(42)", store.Outcome(42).String())
}

func TestPlannedRecord(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	due := at.Add(time.Hour)
	j := store.Job{ID: "daily", Revision: 7, UpdatedAt: at, NextDue: due}
	want := store.RunRecord{
		JobID: "daily", RunID: store.RunID("daily", due), Attempt: 1, Due: due, AttemptDue: due,
		State: store.StateScheduled, UpdatedAt: at,
	}
	tests := []struct {
		name string
		job  func(store.Job) store.Job
		now  time.Time
		ok   bool
	}{
		{"planned", func(j store.Job) store.Job { return j }, at, true},
		{"just before it would have expired", func(j store.Job) store.Job { return j }, at.Add(time.Hour - time.Millisecond), true},
		{"expired with the retention", func(j store.Job) store.Job { return j }, at.Add(time.Hour), false},
		{"paused", func(j store.Job) store.Job { j.NextDue = time.Time{}; return j }, at, false},
		{"deleted", func(j store.Job) store.Job { j.Deleted = true; return j }, at, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := store.PlannedRecord(tt.job(j), tt.now, time.Hour)
			require.Equal(t, tt.ok, ok)
			if ok {
				assert.Equal(t, want, got)
			}
		})
	}
}

func TestWithPlanned(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)
	rec := func(min, attempt int, state store.RunState) store.RunRecord {
		due := at.Add(time.Duration(min) * time.Minute)
		return store.RunRecord{JobID: "j", RunID: store.RunID("j", due), Attempt: attempt, Due: due, State: state}
	}
	planned := rec(20, 1, store.StateScheduled)
	newer, older := rec(30, 1, store.StateSucceeded), rec(10, 1, store.StateSucceeded)
	tests := []struct {
		name  string
		recs  []store.RunRecord
		limit int
		want  []store.RunRecord
	}{
		{"alone", nil, 0, []store.RunRecord{planned}},
		{"in due order", []store.RunRecord{newer, older}, 0, []store.RunRecord{newer, planned, older}},
		{"the limit drops the last", []store.RunRecord{newer, older}, 2, []store.RunRecord{newer, planned}},
		{"beyond the limit", []store.RunRecord{newer}, 1, []store.RunRecord{newer}},
		{"after a full page", []store.RunRecord{newer, rec(25, 1, store.StateFailed)}, 2, []store.RunRecord{newer, rec(25, 1, store.StateFailed)}},
		{"the attempt's history replaces it", []store.RunRecord{newer, rec(20, 1, store.StateRunning), older}, 0,
			[]store.RunRecord{newer, rec(20, 1, store.StateRunning), older}},
		{"a retry of the run lists first", []store.RunRecord{rec(20, 2, store.StateScheduled)}, 0,
			[]store.RunRecord{rec(20, 2, store.StateScheduled), planned}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, store.WithPlanned(tt.recs, planned, tt.limit))
		})
	}
}
