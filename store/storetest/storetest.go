package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

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
		{"TeamRunIndex", testTeamRunIndex},
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
