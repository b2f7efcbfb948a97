package dispatcher

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/store"
)

// slowProducer acknowledges after delay, like a broker at its limit.
type slowProducer struct {
	*fakeProducer
	delay time.Duration
}

func (p slowProducer) ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	time.Sleep(p.delay)
	return p.fakeProducer.ProduceSync(ctx, rs...)
}

// TestOwnerHeldBoundUnderOverload offers a shard ten times what its
// firings can do (4,000 entries due within 4 s, at most 4 firings of 10ms
// at once): the entries it holds stay under MaxHeld plus one page, every
// entry fires once, and in due order up to the firings in flight.
func TestOwnerHeldBoundUnderOverload(t *testing.T) {
	t.Parallel()
	const (
		jobs     = 4000
		maxHeld  = 1000
		inflight = 4
	)
	synctest.Test(t, func(t *testing.T) {
		e := newOwnerEnv(t)
		start := store.Truncate(time.Now())
		herd := start.Add(20 * time.Second)
		for i := range jobs {
			id := fmt.Sprintf("job-%04d", i)
			e.register(jobSpec(id, atSchedule(herd.Add(time.Duration(i)*time.Millisecond))))
		}
		prod := slowProducer{fakeProducer: e.prod, delay: 10 * time.Millisecond}
		var (
			mu      sync.Mutex
			maxSeen int
			polls   int
		)
		e.startWith(prod, func(o *owner) {
			o.observeCore = func(s coreStats) {
				mu.Lock()
				maxSeen = max(maxSeen, s.Entries-s.Chained)
				polls++
				mu.Unlock()
			}
		}, func(c *Config) {
			c.MaxHeld = maxHeld
			c.MaxInflight = inflight
		})
		for len(e.prod.all()) < jobs {
			time.Sleep(time.Second)
		}
		e.o.stop(false)

		mu.Lock()
		defer mu.Unlock()
		require.Positive(t, polls)
		assert.LessOrEqual(t, maxSeen, maxHeld+loadPage, "entries held at once")
		assert.Greater(t, maxSeen, inflight, "the shard held more than its firings: the bound, not the reads, limited it")

		runs := e.prod.all()
		require.Len(t, runs, jobs)
		seen := map[string]bool{}
		latest := time.Time{}
		for i, r := range runs {
			id := r.run.GetJobId()
			assert.False(t, seen[id], "job %s fired twice", id)
			seen[id] = true
			due := r.run.GetDueTime().AsTime()
			// Firings in flight may finish in any order; beyond them, due
			// order holds.
			if i >= inflight {
				prev := runs[i-inflight].run.GetDueTime().AsTime()
				latest = maxTime(latest, prev)
				assert.False(t, due.Before(latest), "run %d due %s after a run due %s", i, due, latest)
			}
		}
		last := runs[len(runs)-1].at
		assert.True(t, last.Sub(herd) >= time.Duration(jobs/inflight)*10*time.Millisecond, "the shard was overloaded: the last run at %s", last.Sub(herd))
	})
}

// TestOwnerHoldsTheLookaheadNotTheBucket spreads 6,000 entries over one
// minute's bucket, 100 a second, with nothing overloaded: the shard reads
// the bucket as its entries come within the look-ahead, so it holds about
// 10 s of them (plus a page) at any time rather than the whole minute, and
// every entry still fires once.
func TestOwnerHoldsTheLookaheadNotTheBucket(t *testing.T) {
	t.Parallel()
	const jobs = 6000
	synctest.Test(t, func(t *testing.T) {
		e := newOwnerEnv(t)
		bucket := store.Truncate(time.Now()).Truncate(time.Minute).Add(2 * time.Minute)
		for i := range jobs {
			id := fmt.Sprintf("job-%04d", i)
			e.register(jobSpec(id, atSchedule(bucket.Add(time.Duration(i)*10*time.Millisecond))))
		}
		var (
			mu      sync.Mutex
			maxSeen int
		)
		e.startWith(e.prod, func(o *owner) {
			o.observeCore = func(s coreStats) {
				mu.Lock()
				maxSeen = max(maxSeen, s.Entries-s.Chained)
				mu.Unlock()
			}
		})
		for len(e.prod.all()) < jobs {
			time.Sleep(time.Second)
		}
		e.o.stop(false)

		mu.Lock()
		defer mu.Unlock()
		// 10 s of look-ahead at 100 a second, the prepare-ahead's 50, and
		// the page that crossed the look-ahead.
		assert.LessOrEqual(t, maxSeen, 1000+50+loadPage, "entries held at once")
		seen := map[string]bool{}
		for _, r := range e.prod.all() {
			id := r.run.GetJobId()
			assert.False(t, seen[id], "job %s fired twice", id)
			seen[id] = true
		}
		assert.Len(t, seen, jobs)
	})
}
