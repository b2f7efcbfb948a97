package storetest

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/store"
)

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
