package dispatcher

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/sundialhq/sundial/store"
)

// tenure is one claim of a shard, from the claim to the release: the shard's
// core and the I/O in flight on its behalf (a bucket read, firings, a
// watermark advance). Only the owner goroutine touches it; the goroutines it
// starts report back through its channels.
type tenure struct {
	o     *owner
	epoch int64
	// floor is the watermark the claim found: the watermark is never
	// written at or before it.
	floor time.Time
	core  *shardCore
	log   *slog.Logger
	label string // the shard, as a metric label

	// Firings run in goroutines of their own, at most MaxInflight at once
	// (the core hands out no more), so results, buffered to that size,
	// never blocks a firing.
	results     chan fireResult
	fires       sync.WaitGroup
	inflight    int
	cancelFires context.CancelFunc

	// One bucket read at a time: the core asks for the next one only once
	// the previous one is done.
	loads      chan loadMsg
	loadCancel context.CancelFunc
	loadDone   chan struct{}

	// One watermark advance at a time. deleted is the start of the first
	// bucket not yet deleted; advanced is the last watermark an advance
	// was started for.
	advances  chan advanceResult
	advancing bool
	deleted   time.Time
	advanced  time.Time

	// committed is the last wake-up offset marked for commit.
	committed int64
}

func (o *owner) newTenure(epoch int64, floor time.Time, cancelFires context.CancelFunc) *tenure {
	loadDone := make(chan struct{})
	close(loadDone)
	return &tenure{
		o:     o,
		epoch: epoch,
		floor: floor,
		core: newShardCore(coreConfig{
			Floor:            floor,
			Lookahead:        o.cfg.Lookahead,
			PrepareAhead:     o.cfg.PrepareAhead,
			MisfireThreshold: o.cfg.MisfireThreshold,
			MaxInflight:      o.cfg.MaxInflight,
			MaxBacklog:       o.cfg.MaxBacklog,
			MaxHeld:          o.cfg.MaxHeld,
			DedupeWindow:     dedupeWindow,
			Splay:            entrySplay,
		}),
		log:         o.log.With("epoch", epoch),
		label:       strconv.Itoa(o.shard),
		results:     make(chan fireResult, o.cfg.MaxInflight),
		cancelFires: cancelFires,
		loads:       make(chan loadMsg),
		loadCancel:  func() {},
		loadDone:    loadDone,
		advances:    make(chan advanceResult, 1),
		deleted:     store.BucketOf(floor.Add(time.Millisecond)),
		committed:   -1,
	}
}

// dispatch carries out the core's decisions until ctx ends or the shard's
// epoch turns out stale, which it reports. fireCtx is the context of the
// firings, which outlive ctx (see drain).
func (t *tenure) dispatch(ctx, fireCtx context.Context) (stale bool) {
	// One timer, for the core's next deadline: there is no poll loop.
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	ticker := time.NewTicker(t.o.cfg.WatermarkInterval)
	defer ticker.Stop()
	for {
		now := t.o.cfg.Now()
		if deadline := t.act(ctx, fireCtx, now); deadline.IsZero() {
			timer.Stop()
		} else {
			timer.Reset(max(deadline.Sub(now), 0))
		}

		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
		case rec := <-t.o.wake:
			t.o.wakeUp(t.core, rec)
		case msg := <-t.pages():
			t.loaded(msg)
		case res := <-t.results:
			t.fired(res)
		case <-ticker.C:
			t.tick(ctx)
		case a := <-t.advances:
			if t.advanceDone(a) {
				return true
			}
		}
	}
}

// act asks the core what is due at now and starts it: the next bucket read
// and the firings. It marks the wake-ups the core has finished with for
// commit and returns when to ask again (zero: after the next event).
func (t *tenure) act(ctx, fireCtx context.Context, now time.Time) time.Time {
	if t.o.share != nil {
		t.core.SetLimits(t.o.share())
	}
	r := t.core.Poll(now)
	if t.o.observeCore != nil {
		t.o.observeCore(t.core.Stats(now))
	}
	if !r.Load.IsZero() {
		t.startLoad(ctx, r.Load)
	}
	for _, d := range r.Dropped {
		t.o.m.dropped.WithLabelValues(d.Reason).Inc()
		t.log.Debug("entry fires no run", "run_id", d.Entry.RunID, "kind", d.Entry.Kind, "due", d.Entry.Due, "reason", d.Reason)
	}
	for _, f := range r.Fire {
		t.startFire(fireCtx, f)
	}
	t.markCommit()
	return r.Deadline
}

func (t *tenure) startLoad(ctx context.Context, bucket time.Time) {
	loadCtx, cancel := context.WithCancel(ctx)
	t.loadCancel, t.loadDone = cancel, make(chan struct{})
	go t.o.load(loadCtx, bucket, t.loads, t.loadDone)
}

// pages is the channel of the bucket read's pages while the core has room
// for another (nil otherwise: the read waits, holding one page at most).
func (t *tenure) pages() <-chan loadMsg {
	if !t.core.Room(t.o.cfg.Now()) {
		return nil
	}
	return t.loads
}

// stopLoad cancels the bucket read in progress, if any, and waits for it.
func (t *tenure) stopLoad() {
	t.loadCancel()
	<-t.loadDone
}

func (t *tenure) loaded(msg loadMsg) {
	t.core.Loaded(t.o.cfg.Now(), msg.entries)
	if msg.done {
		t.core.LoadDone()
	}
}

func (t *tenure) startFire(fireCtx context.Context, f firing) {
	t.inflight++
	t.fires.Add(1)
	t.o.firers.Go(func() {
		defer t.fires.Done()
		t.results <- t.o.fire(fireCtx, t.epoch, f)
	})
}

// fired hands a firing's result to the core. A failed firing is tried again
// after a backoff that doubles with each failure of the entry, from 100ms
// up to 10s.
func (t *tenure) fired(res fireResult) {
	t.inflight--
	now := t.o.cfg.Now()
	if res.next != nil {
		t.core.Insert(now, *res.next, res.nextLate)
	}
	if res.err != nil {
		t.o.m.fireErrors.Inc()
		backoff := min(100*time.Millisecond<<min(failuresOf(t.core, res.entry), 7), 10*time.Second)
		t.log.Warn("firing failed; will try again", "run_id", res.entry.RunID, "retry_in", backoff, "err", res.err)
		t.core.Failed(res.entry, now.Add(backoff))
		return
	}
	t.core.Done(res.entry, res.covered)
}

func failuresOf(c *shardCore, e store.DueEntry) int {
	if it, ok := c.items[keyOf(e)]; ok {
		return it.failures
	}
	return 0
}

// markCommit marks the offset up to which the core has finished with the
// shard's wake-ups for commit.
func (t *tenure) markCommit() {
	if off, le, ok := t.core.Commit(); ok && off > t.committed {
		t.committed = off
		t.o.mark(off, le)
	}
}

// tick publishes the shard's gauges and starts a watermark advance when the
// watermark has moved past the last one and no advance is in flight.
func (t *tenure) tick(ctx context.Context) {
	now := t.o.cfg.Now()
	w := t.core.Watermark(now)
	st := t.core.Stats(now)
	m := t.o.m
	m.entries.WithLabelValues(t.label).Set(float64(st.Entries))
	if st.OldestOverdue.IsZero() {
		m.lag.WithLabelValues(t.label).Set(0)
	} else {
		m.lag.WithLabelValues(t.label).Set(now.Sub(st.OldestOverdue).Seconds())
	}
	m.watermarkAge.WithLabelValues(t.label).Set(now.Sub(maxTime(w, t.advanced)).Seconds())
	if !t.advancing && w.After(t.advanced) && w.After(t.floor) {
		t.advancing = true
		t.advanced = w
		from := t.deleted
		go func() { t.advances <- t.o.advance(ctx, t.epoch, w, from) }()
	}
}

// advanceDone takes an advance's result and reports whether the shard's
// epoch is stale.
func (t *tenure) advanceDone(a advanceResult) (stale bool) {
	t.advancing = false
	t.deleted = a.deleted
	return a.stale
}

// drain ends the tenure. No more reads or firings start; the firings in
// progress get DrainTimeout to finish (so that as few as possible are fired
// again by the next owner), then are cancelled. A lost shard (or a stale
// epoch) may have a new owner already, and nothing of this one counts any
// more: its firings are cancelled at once. Either way a firing waits on
// nothing beyond its context (not even an unacknowledged run record, see
// boundedProducer), so the drain is bounded; a cancelled firing is not
// done, and the watermark stays before it. A shard still ours then gets its
// wake-ups committed and its watermark advanced, so that the next owner
// starts where this one stopped.
func (t *tenure) drain(ctx context.Context, stale bool) {
	t.stopLoad()
	if stale || t.o.isLost() {
		t.cancelFires()
	}
	t.awaitFires()
	if t.advancing && t.advanceDone(<-t.advances) {
		stale = true
	}
	if stale {
		t.o.m.claims.WithLabelValues("stale").Inc()
		t.log.Warn("shard claimed by a newer owner; stopped dispatching it")
		t.o.setLost()
	}
	if t.o.isLost() {
		return
	}
	t.markCommit()
	if w := t.core.Watermark(t.o.cfg.Now()); w.After(t.advanced) && w.After(t.floor) {
		t.o.advance(ctx, t.epoch, w, t.deleted)
	}
	t.log.Info("shard released")
}

// awaitFires takes the results of the firings in progress, cancelling
// those still running after DrainTimeout.
func (t *tenure) awaitFires() {
	if t.inflight == 0 {
		return
	}
	drain := time.NewTimer(t.o.cfg.DrainTimeout)
	defer drain.Stop()
	for t.inflight > 0 {
		select {
		case res := <-t.results:
			t.fired(res)
		case <-drain.C:
			t.cancelFires()
		}
	}
}
