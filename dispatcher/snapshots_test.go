package dispatcher

import (
	"context"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// countingStore counts the store calls of the hot path.
type countingStore struct {
	Store
	getJob, putDue, putEntries, listBucket atomic.Int64
}

func (s *countingStore) GetJob(ctx context.Context, id string) (store.Job, error) {
	s.getJob.Add(1)
	return s.Store.GetJob(ctx, id)
}

func (s *countingStore) PutDue(ctx context.Context, entries ...store.DueEntry) error {
	s.putDue.Add(1)
	s.putEntries.Add(int64(len(entries)))
	return s.Store.PutDue(ctx, entries...)
}

func (s *countingStore) ListBucket(ctx context.Context, bucket time.Time, shard int) iter.Seq2[store.DueEntry, error] {
	s.listBucket.Add(1)
	return s.Store.ListBucket(ctx, bucket, shard)
}

// startWithFeed starts an owner of shard 0 over st with a job cache whose
// feed is fresh: a goroutine of the bubble stands in for the jobs feed.
// The feed starts first; before the owner starts, past the clock skew,
// register runs. The returned function stops both; it is idempotent.
func startWithFeed(e *ownerEnv, st Store, register func()) (*jobCache, func()) {
	cfg := Config{Kafka: []kgo.Opt{kgo.SeedBrokers("unused:9092")}, Store: st, InstanceID: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	require.NoError(e.t, cfg.Validate())
	cfg = cfg.withDefaults()
	m, err := newMetrics(prometheus.NewRegistry())
	require.NoError(e.t, err)
	cache := newJobCache(st, cfg.Now, cfg.PrepareAhead, m)
	cache.setFresh(time.Now(), time.Now())
	stopFeed, feedDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(feedDone)
		for {
			select {
			case <-stopFeed:
				return
			case <-time.After(100 * time.Millisecond):
				cache.setFresh(time.Now(), time.Now())
			}
		}
	}()
	time.Sleep(snapshotClockSkew + time.Second)
	register()
	cc, err := e.st.GetClusterConfig(e.t.Context())
	require.NoError(e.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	e.o = &owner{
		shard: 0, cfg: cfg, store: st, jobs: cache, prod: e.prod, topics: cfg.Topics, m: m, log: cfg.Logger, created: cc.CreatedAt,
		mark: func(int64, int32) {},
		wake: make(chan *kgo.Record, 16), cancel: cancel, quit: ctx.Done(), done: make(chan struct{}),
	}
	go e.o.run(ctx)
	var once sync.Once
	return cache, func() {
		once.Do(func() {
			e.o.stop(false)
			close(stopFeed)
			<-feedDone
			cache.close()
		})
	}
}

// TestFiringReadsNothingAndWritesOnce: a firing of a scheduled entry whose
// snapshot the feed vouches for reads nothing from the store, and stores
// one entry, its successor, through batched writes. A change or a delete
// answered on the feed is still honoured: the old chain is read once,
// found dead and ends.
func TestFiringReadsNothingAndWritesOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := newOwnerEnv(t)
		cs := &countingStore{Store: e.st}
		// The feed starts, then definitions are registered: the feed has
		// every change since their snapshots were checked.
		const jobs = 50
		cache, stop := startWithFeed(e, cs, func() {
			for i := range jobs {
				e.register(jobSpec(fmt.Sprintf("job-%02d", i), intervalSchedule(2*time.Second, 0)))
			}
		})
		defer stop()
		time.Sleep(time.Minute)

		fired := int64(len(e.prod.all()))
		require.GreaterOrEqual(t, fired, int64(jobs*29), "every job every 2s for a minute")
		assert.Zero(t, cs.getJob.Load(), "job reads")
		// Each firing stored its successor, and nothing else; a firing
		// still waiting for its write when time stopped may add one.
		assert.InDelta(t, fired, cs.putEntries.Load(), jobs, "entries written")
		assert.LessOrEqual(t, cs.putDue.Load(), fired, "writes")
		t.Logf("%d firings: %d job reads, %d entries written in %d writes, %d bucket reads",
			fired, cs.getJob.Load(), cs.putEntries.Load(), cs.putDue.Load(), cs.listBucket.Load())

		// job-00 changes to every 3s, job-01 is deleted; the registry
		// answers both on the feed. Their chains' next firings read the
		// job (and find them dead) whenever they come, which may be before
		// from: count the reads from here.
		readsBefore := cs.getJob.Load()
		now := store.Truncate(time.Now())
		spec := jobSpec("job-00", intervalSchedule(3*time.Second, 0))
		value, err := proto.Marshal(spec)
		require.NoError(t, err)
		changedJob := store.Job{ID: "job-00", Spec: value, Revision: 2, UpdatedAt: now, NextDue: now.Add(3 * time.Second)}
		_, err = e.st.UpsertJob(t.Context(), changedJob)
		require.NoError(t, err)
		e.wake(0, changedJob.ScheduledEntry()) // as the registry does for an entry due soon
		cache.changed("job-00", 2)
		_, err = e.st.DeleteJob(t.Context(), "job-01", 2, now)
		require.NoError(t, err)
		cache.changed("job-01", 2)
		// Past PrepareAhead, every firing sees the answers.
		time.Sleep(time.Second)
		from := time.Now()
		time.Sleep(30 * time.Second)
		stop()

		var old, changed []time.Time
		for _, r := range e.prod.of("job-00") {
			if r.at.Before(from) {
				continue
			}
			if r.run.GetDefinitionOffset() == 2 {
				changed = append(changed, r.run.GetDueTime().AsTime())
			} else {
				old = append(old, r.run.GetDueTime().AsTime())
			}
		}
		assert.Empty(t, old, "runs of the replaced definition")
		require.GreaterOrEqual(t, len(changed), 9, "runs of the new definition")
		for i := 1; i < len(changed); i++ {
			assert.Equal(t, 3*time.Second, changed[i].Sub(changed[i-1]))
		}
		for _, r := range e.prod.of("job-01") {
			assert.True(t, r.at.Before(from), "job-01 fired at %s after its delete", r.at)
		}
		reads := cs.getJob.Load() - readsBefore
		assert.Positive(t, reads, "the dead chains were read")
		assert.LessOrEqual(t, reads, int64(4), "only the dead chains were read")
	})
}

// TestChangeLogBounded: the log holds at most two generations; forgetting
// one moves its start, so a snapshot checked before is no longer trusted,
// and one checked after still is.
func TestChangeLogBounded(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	entry := func(job string, rev int64) store.DueEntry {
		return store.DueEntry{Due: t0, JobID: job, Kind: store.KindScheduled, RunID: job + "@0", Attempt: 1, Revision: rev}
	}
	snap := func(checked time.Time) store.JobSnapshot {
		return store.JobSnapshot{Spec: []byte("s"), CheckedAt: checked}
	}

	l := newChangeLog(4)
	assert.False(t, l.covers(entry("a", 1), snap(t0.Add(time.Hour))), "not started")
	l.start(t0)
	l.start(t0.Add(time.Hour)) // only the first start counts
	ok := snap(t0.Add(snapshotClockSkew))
	assert.True(t, l.covers(entry("a", 1), ok))
	assert.False(t, l.covers(entry("a", 1), snap(t0.Add(snapshotClockSkew-time.Millisecond))), "checked within the skew of the start")

	l.add("a", 5, t0.Add(time.Minute))
	assert.False(t, l.covers(entry("a", 4), ok), "changed since")
	assert.True(t, l.covers(entry("a", 5), ok), "the change is the entry's own revision")
	l.add("a", 3, t0.Add(time.Minute))
	assert.False(t, l.covers(entry("a", 4), ok), "the highest revision counts")

	// Fill two generations of two: the first one (a, b) is forgotten
	// when the third begins at 3m, and the log starts when the second
	// began (2m).
	l.add("b", 1, t0.Add(time.Minute))
	l.add("c", 1, t0.Add(2*time.Minute)) // second generation begins
	l.add("d", 1, t0.Add(2*time.Minute))
	assert.Equal(t, t0, l.from)
	l.add("e", 1, t0.Add(3*time.Minute)) // third begins, first forgotten
	assert.Equal(t, t0.Add(2*time.Minute), l.from)
	assert.LessOrEqual(t, len(l.cur)+len(l.prev), 4)
	assert.False(t, l.covers(entry("a", 4), ok), "checked before the start")
	assert.True(t, l.covers(entry("a", 4), snap(t0.Add(2*time.Minute+snapshotClockSkew))), "checked after the start, and a's change forgotten with it")
	assert.False(t, l.covers(entry("c", 0), snap(t0.Add(2*time.Minute+snapshotClockSkew))), "c's change is held")
}

// gatedStore blocks each PutDue until released, and records the size of
// each call.
type gatedStore struct {
	Store
	entered chan int
	release chan error
}

func (s *gatedStore) PutDue(_ context.Context, entries ...store.DueEntry) error {
	s.entered <- len(entries)
	return <-s.release
}

// TestNextOccurrencesShareAWrite: the successors of firings that finish
// while a write is in progress go out together in the next write (a group
// commit, after the gather); each firing hears its own outcome, and a
// failed write fails every firing of its batch, which each try again.
func TestNextOccurrencesShareAWrite(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		gs := &gatedStore{entered: make(chan int), release: make(chan error)}
		cfg := Config{Kafka: []kgo.Opt{kgo.SeedBrokers("unused:9092")}, Store: gs, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}.withDefaults()
		o := &owner{cfg: cfg, store: gs, next: startNextWriter(t.Context(), gs, cfg.FireTimeout, 1, nextGather)}
		defer o.next.Stop()

		entry := func(i int) store.DueEntry {
			due := time.Now().Add(time.Duration(i+1) * time.Second)
			return store.DueEntry{Due: due, JobID: fmt.Sprintf("job-%02d", i), Kind: store.KindScheduled, RunID: fmt.Sprintf("job-%02d@%d", i, due.UnixMilli()), Attempt: 1}
		}
		const firings = 50
		errs := make(chan error, firings)
		go func() { errs <- o.putNext(t.Context(), entry(0)) }()
		require.Equal(t, 1, <-gs.entered, "the first firing waits for nothing but the gather")
		for i := 1; i < firings; i++ {
			go func() { errs <- o.putNext(t.Context(), entry(i)) }()
		}
		synctest.Wait() // the others wait for the write in progress
		gs.release <- nil
		require.NoError(t, <-errs)
		require.Equal(t, firings-1, <-gs.entered, "the rest share one write")
		gs.release <- errBrokerDown
		for range firings - 1 {
			assert.ErrorIs(t, <-errs, errBrokerDown, "each firing of a failed batch hears it")
		}
	})
}

// TestAnswersThatChangeAJob: what the feed records of each answer of the
// registry, and so which snapshots stay trusted. A job's first definition
// (CREATED) is no change a snapshot could predate, so a bulk registration
// fills no memory; an update is; a record the registry did not accept
// stands for a change past its own revision, so an entry an earlier attempt
// at it wrote before dying is read, not trusted.
func TestAnswersThatChangeAJob(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	answer := func(rev int64, accepted bool, o sundialv1.DefinitionOutcome) *kgo.Record {
		st := &sundialv1.JobStatus{
			Subject:  &sundialv1.JobStatus_JobId{JobId: "a"},
			Source:   &sundialv1.RecordSource{Offset: rev},
			Accepted: accepted, Outcome: o,
		}
		v, err := proto.Marshal(st)
		require.NoError(t, err)
		return &kgo.Record{Key: []byte("a"), Value: v, Headers: []kgo.RecordHeader{{Key: sundialv1.HeaderContentType, Value: []byte(sundialv1.ContentTypeProtobuf)}}}
	}
	entry := func(rev int64) store.DueEntry {
		return store.DueEntry{Due: t0, JobID: "a", Kind: store.KindScheduled, RunID: "a@0", Attempt: 1, Revision: rev}
	}
	snap := store.JobSnapshot{Spec: []byte("s"), CheckedAt: t0.Add(time.Minute)}
	feed := func(recs ...*kgo.Record) changeLog {
		l := newChangeLog(16)
		l.start(t0)
		for _, r := range recs {
			if rev, ok := answeredRevision(r); ok {
				l.add("a", rev, t0.Add(2*time.Minute))
			}
		}
		return l
	}
	const (
		created   = sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED
		updated   = sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UPDATED
		unchanged = sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UNCHANGED
		deleted   = sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_DELETED
		rejected  = sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_REJECTED
		stale     = sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_STALE
	)

	l := feed(answer(10, true, created))
	assert.Empty(t, l.cur, "a creation is not held")
	assert.True(t, l.covers(entry(10), snap))

	l = feed(answer(10, true, created), answer(12, true, updated))
	assert.False(t, l.covers(entry(10), snap), "updated since")
	assert.True(t, l.covers(entry(12), snap))

	l = feed(answer(10, true, created), answer(12, true, unchanged))
	assert.False(t, l.covers(entry(10), snap), "an UNCHANGED answer may stand for a change stored by a registry that died")

	l = feed(answer(10, true, created), answer(12, true, deleted), answer(14, true, created))
	assert.False(t, l.covers(entry(10), snap), "the delete ended the first incarnation; the second's creation does not hide it")
	assert.True(t, l.covers(entry(14), snap))

	// An attempt at 10 wrote its entry and died; processed again, 10 was
	// rejected (or found stale); 14 then created the job.
	for _, o := range []sundialv1.DefinitionOutcome{rejected, stale} {
		l = feed(answer(10, false, o), answer(14, true, created))
		assert.False(t, l.covers(entry(10), snap), "the entry of a record %s is trusted", o)
		assert.True(t, l.covers(entry(14), snap), "after %s", o)
	}

	l = feed(&kgo.Record{Key: []byte("a"), Value: []byte("not a status")})
	assert.False(t, l.covers(entry(1<<40), snap), "an answer that does not decode")
}
