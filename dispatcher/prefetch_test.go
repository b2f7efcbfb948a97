package dispatcher

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// countingReader is a jobReader over a map that counts reads; block, if
// set, holds every read until it is closed.
type countingReader struct {
	mu    sync.Mutex
	jobs  map[string]store.Job
	reads atomic.Int64
	block chan struct{}
}

func (r *countingReader) GetJob(ctx context.Context, id string) (store.Job, error) {
	r.reads.Add(1)
	if r.block != nil {
		select {
		case <-r.block:
		case <-ctx.Done():
			return store.Job{}, ctx.Err()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	j, ok := r.jobs[id]
	if !ok {
		return store.Job{}, store.ErrNotFound
	}
	return j, nil
}

func (r *countingReader) set(j store.Job) {
	r.mu.Lock()
	r.jobs[j.ID] = j
	r.mu.Unlock()
}

func newTestCache(t *testing.T, r jobReader) *jobCache {
	m, err := newMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	return newJobCache(r, time.Now, 500*time.Millisecond, m)
}

func TestJobCache(t *testing.T) {
	t.Parallel()
	due := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		// run acts on the cache and returns the revision a firing would
		// get and how many store reads that took in all.
		run       func(t *testing.T, c *jobCache, r *countingReader)
		wantReads int64
		wantRev   int64
	}{
		{
			name: "prefetched job is served from memory",
			run: func(t *testing.T, c *jobCache, r *countingReader) {
				c.prefetch(t.Context(), map[string]time.Time{"a": due})
				r.set(store.Job{ID: "a", Revision: 2}) // not answered by the registry yet
			},
			wantReads: 1, wantRev: 1,
		},
		{
			name: "a job the feed says changed is read again",
			run: func(t *testing.T, c *jobCache, r *countingReader) {
				c.prefetch(t.Context(), map[string]time.Time{"a": due})
				r.set(store.Job{ID: "a", Revision: 2})
				c.invalidate("a")
			},
			wantReads: 2, wantRev: 2,
		},
		{
			name: "a stale feed makes every firing read the store",
			run: func(t *testing.T, c *jobCache, r *countingReader) {
				c.prefetch(t.Context(), map[string]time.Time{"a": due})
				r.set(store.Job{ID: "a", Revision: 2})
				time.Sleep(time.Second) // the feed stops advancing
			},
			wantReads: 2, wantRev: 2,
		},
		{
			name: "nothing is prefetched while the feed is stale",
			run: func(t *testing.T, c *jobCache, r *countingReader) {
				time.Sleep(time.Second)
				c.prefetch(t.Context(), map[string]time.Time{"a": due})
				assert.Zero(t, r.reads.Load())
			},
			wantReads: 1, wantRev: 1,
		},
		{
			name: "a definition older than the maximum age is read again",
			run: func(t *testing.T, c *jobCache, r *countingReader) {
				c.prefetch(t.Context(), map[string]time.Time{"a": due})
				r.set(store.Job{ID: "a", Revision: 2})
				time.Sleep(jobCacheMaxAge + time.Second)
				c.setFresh(time.Now(), time.Now())
			},
			wantReads: 2, wantRev: 2,
		},
		{
			name: "a change answered while the read is in flight is not served",
			run: func(t *testing.T, c *jobCache, r *countingReader) {
				r.block = make(chan struct{})
				go c.prefetch(t.Context(), map[string]time.Time{"a": due})
				synctest.Wait() // the read is in flight
				r.set(store.Job{ID: "a", Revision: 2})
				c.invalidate("a")
				close(r.block)
				synctest.Wait()
			},
			wantReads: 2, wantRev: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				r := &countingReader{jobs: map[string]store.Job{"a": {ID: "a", Revision: 1}}}
				c := newTestCache(t, r)
				c.setFresh(time.Now(), time.Now())
				tt.run(t, c, r)
				j, _, err := c.get(t.Context(), "a", due)
				require.NoError(t, err)
				assert.Equal(t, tt.wantRev, j.Revision)
				assert.Equal(t, tt.wantReads, r.reads.Load())
			})
		})
	}
}

// TestJobCacheNotFoundIsReadAgainAndSweep: the store writes a job's first
// due entry before its row, so a bucket read between the two writes finds
// no job; the firing must read it again instead of dropping the entry as
// dead (which ended the job's chain: TestCrashTakeover saw shards that
// never fired).
func TestJobCacheNotFoundIsReadAgainAndSweep(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := &countingReader{jobs: map[string]store.Job{"a": {ID: "a", Revision: 1}}}
		c := newTestCache(t, r)
		c.setFresh(time.Now(), time.Now())
		c.prefetch(t.Context(), map[string]time.Time{"a": time.Now(), "late": time.Now(), "gone": time.Now()})
		assert.Equal(t, int64(3), r.reads.Load())
		r.set(store.Job{ID: "late", Revision: 1}) // its row lands after the bucket read
		j, _, err := c.get(t.Context(), "late", time.Now())
		require.NoError(t, err, "a job not found by the bucket read is read again by its firing")
		assert.Equal(t, int64(1), j.Revision)
		_, _, err = c.get(t.Context(), "gone", time.Now())
		require.ErrorIs(t, err, store.ErrNotFound)
		assert.Equal(t, int64(5), r.reads.Load(), "a job not found is not remembered")
		_, _, err = c.get(t.Context(), "a", time.Now())
		require.NoError(t, err)
		assert.Equal(t, int64(5), r.reads.Load(), "a job found is")

		time.Sleep(jobCacheLinger)
		c.sweep(time.Now())
		assert.Len(t, c.jobs, 2, "the definitions found (a, late) are kept jobCacheLinger after the due time they were wanted for")
		time.Sleep(time.Millisecond)
		c.sweep(time.Now())
		assert.Empty(t, c.jobs, "definitions no entry wants any more are forgotten")
		assert.Equal(t, 0.0, testutil.ToFloat64(c.m.jobsCached))
	})
}

// TestOwnerFiresFromPrefetchedJobs: with the jobs feed (here a fake that
// keeps the cache fresh), a bucket's read reads its jobs and the firings
// take them from memory, still at their due time; a job changed after its
// bucket was read fires no stale run once the feed has seen the change.
func TestOwnerFiresFromPrefetchedJobs(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := newOwnerEnv(t)
		start := time.Now()
		first := e.register(
			jobSpec("every2s", intervalSchedule(2*time.Second, 0)),
			jobSpec("paused", atSchedule(start.Add(40*time.Second))),
			jobSpec("deleted", atSchedule(start.Add(40*time.Second))),
			jobSpec("kept", atSchedule(start.Add(40*time.Second))),
			jobSpec("changed-while-prepared", atSchedule(start.Add(50*time.Second))),
		)
		reader := &countingReader{jobs: map[string]store.Job{}}
		for id := range first {
			j, err := e.st.GetJob(t.Context(), id)
			require.NoError(t, err)
			reader.set(j)
		}
		cache := startWithJobs(e, reader)
		stopFeed := alwaysFresh(cache) // a feed that is always caught up

		time.Sleep(20 * time.Second) // the bucket of the one-offs is read
		synctest.Wait()
		assert.Positive(t, testutil.ToFloat64(e.o.m.jobCache.WithLabelValues("prefetch")))

		// The registry pauses one job and deletes another, then answers.
		paused := &sundialv1.JobSpec{}
		j, err := reader.GetJob(t.Context(), "paused")
		require.NoError(t, err)
		require.NoError(t, proto.Unmarshal(j.Spec, paused))
		paused.Paused = true
		value, err := proto.Marshal(paused)
		require.NoError(t, err)
		reader.set(store.Job{ID: "paused", Spec: value, Revision: 2, UpdatedAt: time.Now()})
		reader.set(store.Job{ID: "deleted", Revision: 3, Deleted: true, UpdatedAt: time.Now()})
		cache.invalidate("paused")
		cache.invalidate("deleted")

		// An entry that arrives by wake-up has its job read on arrival.
		woken, err := proto.Marshal(jobSpec("woken", atSchedule(start.Add(time.Hour))))
		require.NoError(t, err)
		reader.set(store.Job{ID: "woken", Spec: woken, Revision: 1, UpdatedAt: time.Now()})
		trigger := store.DueEntry{Due: store.Truncate(time.Now().Add(3 * time.Second)), JobID: "woken", Kind: store.KindTrigger, RunID: "woken@t", Attempt: 1}
		reads := reader.reads.Load()
		e.wake(1, trigger)
		synctest.Wait()
		assert.Equal(t, reads+1, reader.reads.Load(), "the woken entry's job is read on arrival, not at its firing")

		// A change answered after the firing was prepared from memory
		// (PrepareAhead before its due time) but before it is due.
		time.Sleep(time.Until(first["changed-while-prepared"].Add(-200 * time.Millisecond)))
		reader.set(store.Job{ID: "changed-while-prepared", Revision: 4, Deleted: true, UpdatedAt: time.Now()})
		cache.invalidate("changed-while-prepared")

		time.Sleep(time.Until(start.Add(80 * time.Second)))
		stopFeed()
		e.o.stop(false)
		cache.close()

		woke := e.prod.of("woken")
		require.Len(t, woke, 1)
		assert.True(t, woke[0].at.Equal(trigger.Due), "acknowledged at %s, due %s", woke[0].at, trigger.Due)

		assert.Empty(t, e.prod.of("paused"), "a job paused after its bucket was read fires no run")
		assert.Empty(t, e.prod.of("deleted"), "a job deleted after its bucket was read fires no run")
		assert.Empty(t, e.prod.of("changed-while-prepared"), "a job deleted after its firing was prepared fires no run")
		assert.Equal(t, 1.0, testutil.ToFloat64(e.o.m.jobCache.WithLabelValues("replan")))
		kept := e.prod.of("kept")
		require.Len(t, kept, 1)
		assert.True(t, kept[0].at.Equal(first["kept"]), "acknowledged at %s, due %s", kept[0].at, first["kept"])
		every := e.prod.of("every2s")
		require.Len(t, every, 41, "every 2s over 80s")
		for _, r := range every {
			assert.True(t, r.at.Equal(r.run.GetDueTime().AsTime()), "run %s acknowledged at %s", r.run.GetRunId(), r.at)
		}
		assert.Less(t, reader.reads.Load(), int64(20), "jobs are read with their buckets or on arrival and after changes, not at each of the recurring job's 41 firings")
		assert.Positive(t, testutil.ToFloat64(e.o.m.jobCache.WithLabelValues("hit")))
	})
}

// startWithJobs starts an owner of shard 0 of e with a job cache over r.
func startWithJobs(e *ownerEnv, r jobReader) *jobCache {
	cfg := Config{Kafka: []kgo.Opt{kgo.SeedBrokers("unused:9092")}, Store: e.st, InstanceID: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	require.NoError(e.t, cfg.Validate())
	cfg = cfg.withDefaults()
	m, err := newMetrics(prometheus.NewRegistry())
	require.NoError(e.t, err)
	cache := newJobCache(r, cfg.Now, cfg.PrepareAhead, m)
	cache.setFresh(time.Now(), time.Now())
	cc, err := e.st.GetClusterConfig(e.t.Context())
	require.NoError(e.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	e.o = &owner{
		shard: 0, cfg: cfg, store: e.st, jobs: cache, prod: e.prod, topics: cfg.Topics, m: m, log: cfg.Logger, created: cc.CreatedAt,
		mark: func(int64, int32) {},
		wake: make(chan *kgo.Record, 16), cancel: cancel, quit: ctx.Done(), done: make(chan struct{}),
	}
	go e.o.run(ctx)
	return cache
}

// TestJobCacheFiringReadsAQueuedJobItself: a firing does not wait for its
// job's turn in a bucket read's queue.
func TestJobCacheFiringReadsAQueuedJobItself(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := &countingReader{jobs: map[string]store.Job{}, block: make(chan struct{})}
		want := map[string]time.Time{}
		for i := range 3 * prefetchWorkers {
			id := fmt.Sprintf("j%02d", i)
			r.jobs[id] = store.Job{ID: id, Revision: 1}
			want[id] = time.Now()
		}
		c := newTestCache(t, r)
		c.setFresh(time.Now(), time.Now())
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.prefetch(t.Context(), want)
		}()
		synctest.Wait()
		require.Equal(t, int64(prefetchWorkers), r.reads.Load(), "the bucket read's workers")
		var queued string
		c.mu.Lock()
		for id, cj := range c.jobs {
			if !cj.started {
				queued = id
				break
			}
		}
		c.mu.Unlock()
		require.NotEmpty(t, queued)
		got := make(chan store.Job)
		go func() {
			j, _, err := c.get(t.Context(), queued, time.Now())
			assert.NoError(t, err)
			got <- j
		}()
		synctest.Wait()
		assert.Equal(t, int64(prefetchWorkers+1), r.reads.Load(), "the firing reads its queued job at once")
		close(r.block)
		assert.Equal(t, queued, (<-got).ID)
		<-done
		assert.Equal(t, int64(3*prefetchWorkers), r.reads.Load(), "every job is read once")
	})
}
