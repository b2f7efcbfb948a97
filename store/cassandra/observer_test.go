package cassandra_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/cassandra"
)

// recorder remembers the statements and batches the driver reports.
type recorder struct {
	mu      sync.Mutex
	queries []string
	batches [][]string
}

func (r *recorder) ObserveQuery(_ context.Context, q gocql.ObservedQuery) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queries = append(r.queries, q.Statement)
}

func (r *recorder) ObserveBatch(_ context.Context, b gocql.ObservedBatch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, b.Statements)
}

func (r *recorder) sawQuery(substr string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, q := range r.queries {
		if strings.Contains(q, substr) {
			return true
		}
	}
	return false
}

func (r *recorder) sawBatch(substr string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.batches {
		if len(b) > 0 && strings.Contains(b[0], substr) {
			return true
		}
	}
	return false
}

// The observers of the configuration see the store's statements and
// batches, and Ping answers while the session is open.
func TestObserversAndPing(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	_, s := setup(t, func(c *cassandra.Config) {
		c.QueryObserver = rec
		c.BatchObserver = rec
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	require.NoError(t, s.Ping(ctx))
	assert.True(t, rec.sawQuery("FROM system.local"), "the ping is observed")

	_, err := s.InitCluster(ctx, 8)
	require.NoError(t, err)
	due := time.Now().UTC().Add(time.Hour).Truncate(time.Minute)
	entry := func(job string) store.DueEntry {
		return store.DueEntry{Due: due, JobID: job, Kind: store.KindScheduled, RunID: store.RunID(job, due), Attempt: 1}
	}
	// Two entries of one job share a partition: one batch.
	second := entry("observed")
	second.Due = due.Add(time.Second)
	second.RunID = store.RunID("observed", second.Due)
	require.NoError(t, s.PutDue(ctx, entry("observed"), second))
	assert.True(t, rec.sawBatch(".due_entries"), "the batch of due entries is observed")

	_, err = s.GetJob(ctx, "observed")
	require.ErrorIs(t, err, store.ErrNotFound)
	assert.True(t, rec.sawQuery(".jobs WHERE id"), "the job read is observed")

	require.NoError(t, s.Close())
	assert.Error(t, s.Ping(ctx), "a closed store is not ready")
}

// TestFirstWritesShareOneShardCountRead sends a burst of first writes
// through a Store that has not read the shard count yet: they read it once,
// instead of one serial read each (which contend in Paxos and, on a node
// just started, time out).
func TestFirstWritesShareOneShardCountRead(t *testing.T) {
	t.Parallel()
	cfg, s := setup(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	_, err := s.InitCluster(ctx, 8)
	require.NoError(t, err)

	rec := &recorder{}
	cfg.QueryObserver = rec
	fresh, err := cassandra.Open(ctx, cfg)
	require.NoError(t, err)
	defer func() { _ = fresh.Close() }()
	due := store.Truncate(time.Now().Add(time.Hour))
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			job := "job-" + strconv.Itoa(i)
			assert.NoError(t, fresh.PutDue(ctx, store.DueEntry{Due: due, JobID: job, Kind: store.KindScheduled, RunID: store.RunID(job, due), Attempt: 1, Revision: 1}))
		})
	}
	wg.Wait()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	reads := 0
	for _, q := range rec.queries {
		if strings.Contains(q, "cluster_config") {
			reads++
		}
	}
	assert.Equal(t, 1, reads, "reads of the shard count by 64 concurrent first writes")
}

// jobRows counts the job rows written, alone or in batches, and the
// history records written with them.
func (r *recorder) jobRows() (rows, records int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	count := func(q string) {
		switch {
		case strings.Contains(q, "INSERT INTO") && strings.Contains(q, ".jobs "):
			rows++
		case strings.Contains(q, ".runs "):
			records++
		}
	}
	for _, q := range r.queries {
		count(q)
	}
	for _, b := range r.batches {
		for _, q := range b {
			count(q)
		}
	}
	return rows, records
}

// count returns how many statements and batches contained substr, and the
// total of both.
func (r *recorder) count(substr string) (n, total int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, q := range r.queries {
		total++
		if strings.Contains(q, substr) {
			n++
		}
	}
	for _, b := range r.batches {
		total++
		if len(b) > 0 && strings.Contains(b[0], substr) {
			n++
		}
	}
	return n, total
}

func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queries, r.batches = nil, nil
}

// The cost of a definition in round trips: a new job is one read and two
// plain writes (its entry, then its row, with no history record), a
// changed one adds the delete of its superseded entry, and none of them
// is a lightweight transaction. In one UpsertJobs call the rows of many
// jobs share a batch.
func TestJobRoundTrips(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	_, s := setup(t, func(c *cassandra.Config) {
		c.QueryObserver = rec
		c.BatchObserver = rec
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err := s.InitCluster(ctx, 8)
	require.NoError(t, err)
	due := time.Now().UTC().Add(time.Hour).Truncate(time.Minute)

	const jobs = 50
	rec.reset()
	for i := range jobs {
		out, err := s.UpsertJob(ctx, store.Job{ID: fmt.Sprintf("rt-%d", i), Spec: []byte("v1"), Revision: 1, UpdatedAt: due, NextDue: due})
		require.NoError(t, err)
		require.Equal(t, store.OutcomeCreated, out)
	}
	conditional, total := rec.count(" IF ")
	assert.Zero(t, conditional, "no lightweight transaction")
	assert.Equal(t, 3*jobs, total, "round trips of %d new jobs", jobs)
	rows, records := rec.jobRows()
	assert.Equal(t, jobs, rows, "job rows written")
	assert.Zero(t, records, "history records written")

	rec.reset()
	for i := range jobs {
		out, err := s.UpsertJob(ctx, store.Job{ID: fmt.Sprintf("rt-%d", i), Spec: []byte("v2"), Revision: 2, UpdatedAt: due, NextDue: due.Add(time.Minute)})
		require.NoError(t, err)
		require.Equal(t, store.OutcomeUpdated, out)
	}
	conditional, total = rec.count(" IF ")
	assert.Zero(t, conditional, "no lightweight transaction")
	assert.Equal(t, 4*jobs, total, "round trips of %d changed jobs", jobs)

	rec.reset()
	for i := range jobs {
		out, err := s.DeleteJob(ctx, fmt.Sprintf("rt-%d", i), 3, due)
		require.NoError(t, err)
		require.Equal(t, store.OutcomeDeleted, out)
	}
	conditional, total = rec.count(" IF ")
	assert.Zero(t, conditional, "no lightweight transaction")
	assert.Equal(t, 3*jobs, total, "round trips of %d deletes (read, tombstone, entry)", jobs)

	// In one UpsertJobs call: reads of up to 32 ids, one batch of first occurrences
	// per partition (8 shards, one bucket) and one batch of the rows (small
	// ones: they fit maxRowBatchBytes together).
	many := make([]store.Job, jobs)
	for i := range many {
		many[i] = store.Job{ID: fmt.Sprintf("rt-many-%d", i), Spec: []byte("v1"), Revision: 1, UpdatedAt: due, NextDue: due}
	}
	rec.reset()
	results, err := s.UpsertJobs(ctx, many)
	require.NoError(t, err)
	for _, r := range results {
		require.NoError(t, r.Err)
		require.Equal(t, store.OutcomeCreated, r.Outcome)
	}
	conditional, total = rec.count(" IF ")
	assert.Zero(t, conditional, "no lightweight transaction")
	entries, _ := rec.count(".due_entries")
	assert.LessOrEqual(t, entries, 8, "first occurrences grouped by partition")
	rows, records = rec.jobRows()
	assert.Equal(t, jobs, rows, "job rows written")
	assert.Zero(t, records, "history records written")
	jobBatches, _ := rec.count(".jobs (id, spec")
	assert.Equal(t, 1, jobBatches, "job rows batched")
	assert.LessOrEqual(t, total, jobs+8+1, "round trips of %d new jobs in one call", jobs)
	t.Logf("%d new jobs: %d round trips one by one, %d in one UpsertJobs call", jobs, 3*jobs, total)
}

// A definition as large as a payload may make (jobspec's default bound is
// 256 KiB) is stored by both paths. Cassandra refuses a batch over
// batch_size_fail_threshold (50 KiB by default) unless the batch is one
// mutation: UpsertJobs writes such a row alone, and its planned attempt
// is listed from the row.
func TestLargeDefinitionIsStored(t *testing.T) {
	t.Parallel()
	_, s := setup(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err := s.InitCluster(ctx, 8)
	require.NoError(t, err)
	due := time.Now().UTC().Add(time.Hour).Truncate(time.Millisecond)
	spec := []byte(strings.Repeat("x", 300<<10))

	out, err := s.UpsertJob(ctx, store.Job{ID: "large-one", Spec: spec, Revision: 1, UpdatedAt: due, NextDue: due})
	require.NoError(t, err)
	assert.Equal(t, store.OutcomeCreated, out)

	results, err := s.UpsertJobs(ctx, []store.Job{
		{ID: "large-many-1", Spec: spec, Revision: 1, UpdatedAt: due, NextDue: due},
		{ID: "large-many-2", Spec: spec, Revision: 1, UpdatedAt: due, NextDue: due},
	})
	require.NoError(t, err)
	for _, r := range results {
		require.NoError(t, r.Err)
		assert.Equal(t, store.OutcomeCreated, r.Outcome)
	}
	for _, id := range []string{"large-one", "large-many-1", "large-many-2"} {
		j, err := s.GetJob(ctx, id)
		require.NoError(t, err)
		assert.Len(t, j.Spec, len(spec), id)
		runs, err := s.ListRuns(ctx, id, 10)
		require.NoError(t, err)
		require.Len(t, runs, 1, "the planned attempt of %s", id)
		assert.Equal(t, store.StateScheduled, runs[0].State)
	}
}
