package dispatcher

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sundialhq/sundial/store"
)

// Job definitions read ahead of their firings.
//
// A firing needs its job (to check the entry is live and to snapshot the
// job into the run). Reading it on the firing path costs a store read per
// run, all at once when many runs fall due together. A scheduled entry
// usually carries its job (snapshots.go); for the others, a bucket's read
// also reads the jobs of its entries (prefetch, at most maxJobReads reads in
// flight per dispatcher), and firings take them from memory.
//
// A definition in memory may have changed since it was read. The jobs feed
// (jobfeed.go) follows sundial.jobs.status, which the registry writes after
// it has stored a change, and drops the job from memory when its answer
// arrives. The feed also says how fresh it is: every answer acknowledged
// before fresh has been applied. A definition in memory is used only while
// the feed is fresher than maxLag (Config.JobFeedMaxLag), and while it is
// younger than maxAge; otherwise the firing reads the store as it did
// without a feed. So a change the registry has answered more than maxLag
// before a firing is always seen.

// maxJobReads bounds the job reads of one dispatcher in flight at once,
// prefetches and firings together, so that a bucket of a hundred thousand
// entries queues here rather than in the store.
const maxJobReads = 256

// prefetchWorkers bounds the goroutines one bucket read uses for its jobs.
const prefetchWorkers = 8

// jobCacheMaxAge bounds how long a definition read is trusted, whatever the
// feed says: a change the registry stored but never answered (it crashed in
// between, and has not processed the record again yet) is seen after this
// long at the latest. It covers the look-ahead window (a bucket is read at
// most a minute and Lookahead before its last entry is due).
const jobCacheMaxAge = 2 * time.Minute

// jobCacheLinger is how long after the latest due time it was wanted for a
// definition stays in memory: long enough for a firing retried after a
// failure to find it, short enough that memory follows the entries due
// now, not the last minute's. A definition forgotten too early costs one
// read (or nothing, when the entry's snapshot is used).
const jobCacheLinger = 10 * time.Second

// jobReader reads a job definition; Store is one.
type jobReader interface {
	GetJob(ctx context.Context, id string) (store.Job, error)
}

// jobCache holds the definitions the dispatcher's entries in memory need.
// Memory is bounded by the entries of the loaded windows: a definition is
// forgotten jobCacheLinger after the last due time it was wanted for.
type jobCache struct {
	store  jobReader
	now    func() time.Time
	maxLag time.Duration
	m      *metrics
	reads  chan struct{}

	mu    sync.Mutex
	jobs  map[string]*cachedJob
	fresh time.Time
	// changes holds the revision of every change the feed has seen since
	// trustFrom (see snapshots.go).
	changes changeLog
	// Background reads (warm): closed stops new ones, quit cancels those
	// in flight, wg waits for them.
	closed bool
	quit   chan struct{}
	wg     sync.WaitGroup
}

// cachedJob is a definition read, or being read (ready not closed yet).
type cachedJob struct {
	ready chan struct{}
	// job and err are set before ready closes. Only a job found is kept:
	// a failed read, and a job not found, are dropped once ready closes.
	// Not found is not remembered because the store writes a job's first
	// due entry before its row: a bucket read between the two writes finds
	// the entry and not the job, and its firing must look again.
	job    store.Job
	err    error
	readAt time.Time
	// until is the latest due time of an entry that wants the job.
	until time.Time
	// started: a read of it has begun (guarded by the cache's mu). A
	// prefetched job waits in its bucket read's queue until then, and a
	// firing that wants it first reads it itself.
	started bool
}

func newJobCache(r jobReader, now func() time.Time, maxLag time.Duration, m *metrics) *jobCache {
	return &jobCache{store: r, now: now, maxLag: maxLag, m: m, reads: make(chan struct{}, maxJobReads), jobs: map[string]*cachedJob{},
		changes: newChangeLog(defaultChangesHeld), quit: make(chan struct{})}
}

// close cancels the background reads and waits for them; idempotent.
func (c *jobCache) close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.quit)
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// warm starts reading job id in the background, unless it is in memory or
// being read: the job of an entry that arrived by wake-up is read on
// arrival, so it is in memory by the entry's firing time.
func (c *jobCache) warm(id string, due time.Time) {
	if !c.usable(c.now()) {
		return
	}
	c.mu.Lock()
	if cj, ok := c.jobs[id]; ok || c.closed {
		if ok {
			cj.until = maxTime(cj.until, due)
		}
		c.mu.Unlock()
		return
	}
	cj := c.startLocked(id, due)
	cj.started = true
	c.wg.Add(1)
	c.mu.Unlock()
	c.m.jobCache.WithLabelValues("prefetch").Inc()
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), DefaultFireTimeout)
		defer cancel()
		go func() {
			select {
			case <-c.quit:
				cancel()
			case <-ctx.Done():
			}
		}()
		c.read(ctx, id, cj)
	}()
}

// usable says whether definitions in memory may be used at now: the feed
// has applied every change answered before now - maxLag.
func (c *jobCache) usable(now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.usableLocked(now)
}

func (c *jobCache) usableLocked(now time.Time) bool {
	return !c.fresh.IsZero() && !c.fresh.Before(now.Add(-c.maxLag))
}

// setFresh records that every change answered before t has been applied,
// and the first time also that the change log holds every change answered
// since since (the feed's replay).
func (c *jobCache) setFresh(t, since time.Time) {
	c.mu.Lock()
	if t.After(c.fresh) {
		c.fresh = t
	}
	c.changes.start(since)
	c.mu.Unlock()
}

// freshness returns the feed's fresh time (zero before it first caught up).
func (c *jobCache) freshness() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fresh
}

// invalidate forgets a job that changed. A read in flight for it is
// detached: its result serves no later lookup.
func (c *jobCache) invalidate(id string) {
	c.mu.Lock()
	if _, ok := c.jobs[id]; ok {
		delete(c.jobs, id)
		c.m.jobCache.WithLabelValues("invalidated").Inc()
	}
	c.mu.Unlock()
}

// prefetch reads the jobs not in memory yet, waiting for the reads. due is
// when each is wanted; errors are left to the firings, which read again.
func (c *jobCache) prefetch(ctx context.Context, want map[string]time.Time) {
	if !c.usable(c.now()) {
		return // the firings read their jobs; reading now would be wasted
	}
	type pending struct {
		id string
		cj *cachedJob
	}
	var todo []pending
	c.mu.Lock()
	for id, due := range want {
		if cj, ok := c.jobs[id]; ok {
			cj.until = maxTime(cj.until, due)
			continue
		}
		todo = append(todo, pending{id, c.startLocked(id, due)})
	}
	c.mu.Unlock()
	c.m.jobCache.WithLabelValues("prefetch").Add(float64(len(todo)))
	// A few workers per caller: the reads in flight are bounded by
	// c.reads anyway, and a herd's buckets, read by every owner at once,
	// must not park a goroutine per entry.
	var (
		wg   sync.WaitGroup
		next atomic.Int64
	)
	for range min(len(todo), prefetchWorkers) {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(todo)); i = next.Add(1) - 1 {
				if c.claim(todo[i].cj) {
					c.read(ctx, todo[i].id, todo[i].cj)
				}
			}
		})
	}
	wg.Wait()
}

// claim marks cj's read as begun; false if it already had.
func (c *jobCache) claim(cj *cachedJob) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cj.started {
		return false
	}
	cj.started = true
	return true
}

// startLocked puts a new entry for id in memory, to be filled by read.
func (c *jobCache) startLocked(id string, due time.Time) *cachedJob {
	cj := &cachedJob{ready: make(chan struct{}), until: due}
	c.jobs[id] = cj
	return cj
}

// read fills cj from the store. A failed read, or a job not found, is not
// kept (see cachedJob).
func (c *jobCache) read(ctx context.Context, id string, cj *cachedJob) {
	defer close(cj.ready)
	select {
	case c.reads <- struct{}{}:
	case <-ctx.Done():
		cj.err = ctx.Err()
		c.drop(id, cj)
		return
	}
	cj.readAt = c.now()
	cj.job, cj.err = c.store.GetJob(ctx, id)
	<-c.reads
	if cj.err != nil {
		c.drop(id, cj)
	}
}

// drop removes cj if it is still id's entry.
func (c *jobCache) drop(id string, cj *cachedJob) {
	c.mu.Lock()
	if c.jobs[id] == cj {
		delete(c.jobs, id)
	}
	c.mu.Unlock()
}

// get returns job id for an entry due at due: from memory when that is
// allowed at now (see usable), else from the store (and keeps it); and when
// it was read.
func (c *jobCache) get(ctx context.Context, id string, due time.Time) (store.Job, time.Time, error) {
	for {
		now := c.now()
		c.mu.Lock()
		cj, ok := c.jobs[id]
		usable := c.usableLocked(now)
		if ok && (!usable || (isReady(cj) && cj.readAt.Before(now.Add(-jobCacheMaxAge)))) {
			// Not to be trusted: read again, in place of it.
			ok = false
		}
		if !ok {
			cj = c.startLocked(id, due)
			cj.started = true
			c.mu.Unlock()
			c.m.jobCache.WithLabelValues("miss").Inc()
			c.read(ctx, id, cj)
			return cj.job, cj.readAt, cj.err
		}
		cj.until = maxTime(cj.until, due)
		steal := !cj.started
		cj.started = true
		c.mu.Unlock()
		if steal {
			// Still queued behind its bucket's other reads: read it now.
			c.read(ctx, id, cj)
		}
		select {
		case <-cj.ready:
		case <-ctx.Done():
			return store.Job{}, time.Time{}, ctx.Err()
		}
		c.mu.Lock()
		current := c.jobs[id] == cj
		c.mu.Unlock()
		if current && (cj.err == nil || errors.Is(cj.err, store.ErrNotFound)) {
			c.m.jobCache.WithLabelValues("hit").Inc()
			return cj.job, cj.readAt, cj.err
		}
		// Changed (or failed) while it was being read: look again.
	}
}

// unchanged says whether the job in memory is still at revision rev and may
// still be used: a firing planned from it ahead of its firing time checks
// this at the firing time.
func (c *jobCache) unchanged(id string, rev int64) bool {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	cj, ok := c.jobs[id]
	return ok && c.usableLocked(now) && isReady(cj) && cj.err == nil && cj.job.Revision == rev &&
		!cj.readAt.Before(now.Add(-jobCacheMaxAge))
}

func isReady(cj *cachedJob) bool {
	select {
	case <-cj.ready:
		return true
	default:
		return false
	}
}

// sweep forgets the definitions no entry has wanted for jobCacheLinger.
func (c *jobCache) sweep(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, cj := range c.jobs {
		if isReady(cj) && cj.until.Before(now.Add(-jobCacheLinger)) {
			delete(c.jobs, id)
		}
	}
	c.m.jobsCached.Set(float64(len(c.jobs)))
}

// needsJob says whether firing e may read its job. Every firing does: a
// retry or DAG entry that carries its whole run still needs to know whether
// its job is paused (hold.go).
func needsJob(store.DueEntry) bool { return true }

// jobsOf returns the jobs a page of entries needs read, each with the latest
// due time it is wanted for: not those whose entry carries a snapshot the
// firing can use (snapshots.go).
func (c *jobCache) jobsOf(entries []store.DueEntry) map[string]time.Time {
	want := map[string]time.Time{}
	for _, e := range entries {
		if needsJob(e) && !c.snapshotLikely(e) {
			want[e.JobID] = maxTime(want[e.JobID], e.Due)
		}
	}
	return want
}
