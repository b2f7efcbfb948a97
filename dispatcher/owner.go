package dispatcher

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/enqueue"
	"github.com/sundialhq/sundial/internal/backoff"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// loadPage is how many entries of a bucket travel to the core at once. A
// read waiting for room holds one page besides what the core holds, in
// every shard being read: small pages keep that small.
const loadPage = 64

// owner is the goroutine that dispatches one owned shard: it claims the
// shard, then runs the shard's core, carrying out its decisions (bucket
// reads, firings, watermark advances) with I/O in goroutines it owns and
// waits for. One owner exists per assigned partition of sundial.shards;
// revoking the partition stops the owner and waits for it to drain.
type owner struct {
	shard   int
	cfg     Config
	store   Store
	jobs    *jobCache // job definitions read ahead, if set (prefetch.go)
	prod    producer
	topics  topics.Names
	m       *metrics
	log     *slog.Logger
	created time.Time
	// mark records the commit point of the shard's wake-ups.
	mark func(offset int64, leaderEpoch int32)
	// observe, if set, sees every acknowledged run (tests).
	observe func(runs []*sundialv1.Run, acked time.Time)
	// observeCore, if set, sees the core's stats after every Poll (tests).
	observeCore func(coreStats)
	// share, if set, returns this shard's share of the dispatcher's
	// MaxFiring and MaxHeld; without it the shard has them whole.
	share func() (inflight, held int)

	// wake carries the shard's wake-up records from the poll loop.
	wake chan *kgo.Record
	// next stores the next occurrences of the shard's firings; the
	// dispatcher's writer, shared by its owners (nextwriter.go).
	next *nextWriter
	// firers runs the shard's firings; the dispatcher's, shared by its
	// owners (firers.go).
	firers *firers

	// cancel ends run's context (stop); quit is that context's Done, for
	// the poll loop; done closes when run has returned.
	cancel context.CancelFunc
	quit   <-chan struct{}
	done   chan struct{}
	// lost: the partition was lost rather than revoked, or the shard was
	// claimed by a newer owner. Either way this owner may no longer commit
	// offsets or advance the watermark.
	lostMu sync.Mutex
	lost   bool
}

func (o *owner) setLost() {
	o.lostMu.Lock()
	o.lost = true
	o.lostMu.Unlock()
}

func (o *owner) isLost() bool {
	o.lostMu.Lock()
	defer o.lostMu.Unlock()
	return o.lost
}

// stop ends the owner and waits until it has drained. lost says the
// partition was lost: nothing may be committed or advanced any more.
func (o *owner) stop(lost bool) {
	if lost {
		o.setLost()
	}
	o.cancel()
	<-o.done
}

type loadMsg struct {
	entries []store.DueEntry
	done    bool
}

type advanceResult struct {
	stale bool
	// deleted is the start of the first bucket not yet deleted.
	deleted time.Time
}

// run is the owner goroutine; ctx ends when the shard is given up. It
// claims the shard, dispatches it until ctx ends or the claim turns out
// stale, then drains (tenure.go).
func (o *owner) run(ctx context.Context) {
	defer close(o.done)
	epoch, floor, ok := o.claim(ctx)
	if !ok {
		return
	}
	o.m.shardsOwned.Inc()
	defer o.m.shardsOwned.Dec()
	defer o.m.forgetShard(o.shard)

	// Firings and the writer of their next occurrences outlive ctx: a
	// revoked shard lets its firings finish (tenure.drain).
	fireCtx, cancelFires := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelFires()
	if o.next == nil { // an owner of its own, in tests
		w := startNextWriter(ctx, o.store, o.cfg.FireTimeout, 1, 0)
		defer w.Stop()
		o.next = w
	}
	if o.firers == nil { // likewise
		f := newFirers(firerIdle)
		defer f.Stop()
		o.firers = f
	}

	t := o.newTenure(epoch, floor, cancelFires)
	defer t.fires.Wait()
	defer t.stopLoad()
	t.log.Info("shard claimed", "watermark", floor)
	stale := t.dispatch(ctx, fireCtx)
	t.drain(ctx, stale)
}

// wakeUp hands a wake-up record to the core.
func (o *owner) wakeUp(core *shardCore, rec *kgo.Record) {
	e, err := enqueue.Decode(rec.Value)
	if err != nil {
		o.m.wakeups.WithLabelValues("invalid").Inc()
		o.log.Warn("wake-up record does not decode; skipped", "offset", rec.Offset, "err", err)
		core.WakeInvalid(rec.Offset, rec.LeaderEpoch)
		return
	}
	taken := core.Wake(o.cfg.Now(), e, rec.Offset, rec.LeaderEpoch)
	if taken {
		o.m.wakeups.WithLabelValues("taken").Inc()
	} else {
		o.m.wakeups.WithLabelValues("ignored").Inc()
	}
	if o.jobs != nil && needsJob(e) {
		// A wake-up is sent once its entry and its job's row are stored
		// (the store writes the entry first). What memory holds of the
		// job may predate the row: a bucket read between the two writes
		// found the entry and remembered the job as not found, or an
		// older revision; fired from that, the entry would be dropped as
		// dead and its chain would end. So the job is read again: on
		// arrival if the wake-up took the entry into memory, else by the
		// firing. Also when the entry was known already: the racing
		// bucket read took it first.
		o.jobs.invalidate(e.JobID)
		if taken && !o.jobs.snapshotLikely(e) {
			o.jobs.warm(e.JobID, e.Due) // read on arrival, ahead of the firing
		}
	}
}

// claim makes this dispatcher the shard's owner in the store: it reads the
// shard's epoch and claims the next one, again on a conflict (another
// claimant won the race; its claim is fenced by ours if we win later, and
// Kafka gives the partition to one of us only), with backoff on errors. It
// returns the epoch and the floor: the watermark to catch up from.
func (o *owner) claim(ctx context.Context) (int64, time.Time, bool) {
	retry := backoff.New(50*time.Millisecond, 5*time.Second)
	for {
		st, err := o.store.GetShard(ctx, o.shard)
		if err == nil {
			var epoch int64
			epoch, err = o.store.ClaimShard(ctx, o.shard, o.cfg.InstanceID, st.Epoch)
			if err == nil {
				o.m.claims.WithLabelValues("claimed").Inc()
				return epoch, o.floor(st), true
			}
			if errors.Is(err, store.ErrEpochConflict) {
				o.m.claims.WithLabelValues("conflict").Inc()
				o.log.Info("shard claim conflict; reading the epoch again", "err", err)
				continue
			}
		}
		if ctx.Err() != nil {
			return 0, time.Time{}, false
		}
		o.m.claims.WithLabelValues("error").Inc()
		o.log.Warn("cannot claim shard; will try again", "retry_within", retry.Peek(), "err", err)
		if !retry.Wait(ctx) {
			return 0, time.Time{}, false
		}
	}
}

// floor is where catch-up starts: the shard's watermark, but never before
// the cluster existed or further back than the catch-up horizon.
func (o *owner) floor(st store.ShardState) time.Time {
	horizon := store.Truncate(o.cfg.Now().Add(-o.cfg.CatchUpHorizon))
	floor := st.Watermark
	if floor.IsZero() {
		floor = store.Truncate(o.created).Add(-time.Millisecond)
	} else if floor.Before(horizon) {
		o.log.Warn("watermark is older than the catch-up horizon; entries before the horizon are not read",
			"watermark", floor, "horizon", horizon)
	}
	return maxTime(floor, horizon)
}

// load reads one bucket page by page into the core, trying again from the
// start after an error (the core ignores what it already holds).
func (o *owner) load(ctx context.Context, bucket time.Time, out chan<- loadMsg, done chan<- struct{}) {
	defer close(done)
	start := o.cfg.Now()
	retry := backoff.New(100*time.Millisecond, 10*time.Second)
	send := func(m loadMsg) bool {
		select {
		case out <- m:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		n := 0
		page := make([]store.DueEntry, 0, loadPage)
		var err error
		for e, lerr := range o.store.ListBucket(ctx, bucket, o.shard) {
			if lerr != nil {
				err = lerr
				break
			}
			page = append(page, e)
			n++
			if len(page) == loadPage {
				if !send(loadMsg{entries: page}) {
					return
				}
				o.prefetch(ctx, page)
				page = make([]store.DueEntry, 0, loadPage)
			}
		}
		if err == nil {
			// The bucket counts as read once its jobs are: the next
			// bucket's read does not start before.
			if !send(loadMsg{entries: page}) {
				return
			}
			o.prefetch(ctx, page)
			o.m.bucketLoad.Observe(o.cfg.Now().Sub(start).Seconds())
			o.m.bucketSize.Observe(float64(n))
			send(loadMsg{done: true})
			return
		}
		if ctx.Err() != nil {
			return
		}
		o.log.Warn("cannot read bucket; will try again", "bucket", bucket, "retry_within", retry.Peek(), "err", err)
		if !retry.Wait(ctx) {
			return
		}
	}
}

// prefetch reads the jobs of a page of a bucket ahead of their firings, when
// the dispatcher follows the jobs feed.
func (o *owner) prefetch(ctx context.Context, page []store.DueEntry) {
	if o.jobs != nil && len(page) > 0 {
		o.jobs.prefetch(ctx, o.jobs.jobsOf(page))
	}
}

// advance moves the shard's watermark to w (conditional on the epoch), then
// deletes the buckets wholly behind it, starting at from. It reports the
// first bucket not deleted and whether the epoch is stale. It is not cut
// short by ctx's end: the last advance happens while the owner drains.
func (o *owner) advance(ctx context.Context, epoch int64, w, from time.Time) advanceResult {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.cfg.FireTimeout)
	defer cancel()
	res := advanceResult{deleted: from}
	if err := o.store.AdvanceWatermark(ctx, o.shard, epoch, w); err != nil {
		if errors.Is(err, store.ErrStaleEpoch) {
			res.stale = true
			return res
		}
		o.log.Warn("cannot advance watermark; will try again", "watermark", w, "err", err)
		return res
	}
	for b := from; !b.Add(time.Minute).After(w.Add(time.Millisecond)); b = b.Add(time.Minute) {
		if err := o.store.DeleteBucket(ctx, b, o.shard); err != nil {
			o.log.Warn("cannot delete bucket behind the watermark; will try again", "bucket", b, "err", err)
			return res
		}
		res.deleted = b.Add(time.Minute)
	}
	return res
}

// putNext stores an entry through the dispatcher's writer of next
// occurrences (nextwriter.go).
func (o *owner) putNext(ctx context.Context, e store.DueEntry) error {
	return o.next.put(ctx, e)
}
