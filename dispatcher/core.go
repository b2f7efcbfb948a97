package dispatcher

import (
	"container/heap"
	"hash/maphash"
	"time"

	"github.com/sundialhq/sundial/store"
)

// The timing core of one owned shard. It is pure: every method takes the
// current time as an argument, nothing reads a clock, starts a goroutine or
// does I/O. The shard's owner goroutine (owner.go) feeds it events (a page of
// a bucket read, a wake-up, the outcome of a firing) and carries out what
// Poll returns (read this bucket, fire these entries, wake me at this time).
//
// Terms:
//
//   - floor: the shard's watermark when it was claimed. Every entry due at
//     or before it was dispatched by an earlier owner, so bucket reads skip
//     such entries; wake-ups for them still fire (an entry written behind
//     the watermark is found by no bucket read, so its wake-up is all there
//     is).
//   - issued: the start of the first bucket whose read has not been
//     started. Entries due before it are "inside the window": a wake-up or
//     a chained occurrence due there is taken into memory, because the read
//     of its bucket may already have passed it. Entries due at or after it
//     are left to that bucket's read. The window grows when a read is
//     started, not when it completes, so an entry written while its bucket
//     is being read is caught by one or the other.
//   - complete: every bucket before it has been read to the end.
//
// Scheduled entries of one job and revision form a chain: the owner that
// fires an occurrence stores the next one only after the run is produced, so
// a stored successor proves its predecessor was emitted. The core uses that
// when a new owner finds several entries of a chain in memory (the previous
// owner fired some after its last watermark advance): an entry whose chain
// holds a later entry is superseded and dropped. A late entry stands for
// every occurrence up to the time it is fired (see fire.go); the owner
// reports that time as the chain's covered time, and entries of the chain due
// by then are dropped when they come up, so a catch-up never fires an
// occurrence twice. While a late entry of a chain is being fired, the chain's
// other entries wait (parked), because the covered time is not known yet.
//
// Reads are started one at a time, each when now reaches its bucket's
// start minus the look-ahead. While catching up (reading buckets already in
// the past), the next read waits until fewer than maxBacklog entries are in
// memory, so memory stays bounded by the window rather than by the outage.
//
// Whether behind or not, the entries held are bounded by maxHeld: no read
// starts, and no further page of the read in progress is taken, while the
// core holds that many entries it read or was woken for. Chained successors
// the owner inserts are not counted against it: they replace the entry that
// fired (one per chain at a time), and counting them would let a window full
// of frequently recurring jobs starve the read of entries due before them.
// A read paused that way resumes as firings free room, so entries still fire
// in due order, only later.
//
// Nor is a further page taken once the read has passed the look-ahead: a
// bucket's rows come in due order, so the rest of it falls due later still,
// and is taken as now reaches it (Poll's deadline says when). A minute's
// bucket is then held about Lookahead at a time, not whole: the memory
// follows the rate times the look-ahead, and MaxHeld bounds it only when
// more than that falls due at once (a herd, a catch-up).

// key identifies an entry in memory. DueKey holds a time.Time, which is not
// a reliable map key (location and monotonic reading take part in ==).
type key struct {
	due   int64 // unix ms
	job   string
	kind  store.Kind
	runID string
}

func keyOf(e store.DueEntry) key {
	return key{due: e.Due.UnixMilli(), job: e.JobID, kind: e.Kind, runID: e.RunID}
}

// firedKey is what the dedupe memory keeps of a fired entry's key: two
// 64-bit hashes of it under independent seeds. It holds no strings, so a
// fired entry keeps alive neither its ids nor the driver page they were
// decoded from, and a key costs 24 bytes with its due time instead of about
// a hundred. Two keys with the same pair of hashes would make the second
// look fired; among the hundred thousand keys of a window the chance is
// about 10^-29.
type firedKey [2]uint64

// firedHasher hashes keys into firedKeys.
type firedHasher struct{ a, b maphash.Seed }

func newFiredHasher() firedHasher {
	return firedHasher{a: maphash.MakeSeed(), b: maphash.MakeSeed()}
}

func (h firedHasher) of(k key, revision int64) firedKey {
	id := firedID{key: k, revision: revision}
	return firedKey{maphash.Comparable(h.a, id), maphash.Comparable(h.b, id)}
}

// firedID is what the dedupe memory tells apart: an entry's key and the
// revision of the definition it was written for. The same key written again
// for a newer definition is new work, not a repeated wake-up: a job resumed
// within the dedupe window gets its next occurrence from the registry at
// the key of the occurrence that was dropped while it was paused, and that
// entry must fire.
type firedID struct {
	key      key
	revision int64
}

// chain names the scheduled entries of one job definition.
type chain struct {
	job string
	rev int64
}

func chainOf(e store.DueEntry) (chain, bool) {
	return chain{job: e.JobID, rev: e.Revision}, e.Kind == store.KindScheduled
}

// chainState tracks a chain's entries in memory.
type chainState struct {
	// n counts the chain's entries in memory; latest is the latest due
	// time (unix ms) among them.
	n      int
	latest int64
	// expanding is the late entry of the chain being fired, if any;
	// parked are the chain's entries waiting for it.
	expanding *item
	parked    []*item
}

// item is an entry waiting to fire or in flight.
type item struct {
	entry store.DueEntry
	key   key
	// at is when the entry fires: its due time, or a retry time after a
	// failed attempt to fire it.
	at time.Time
	// late says the entry was first seen more than the misfire threshold
	// after its due time: it was missed, not merely fired a little late.
	late bool
	// offsets are the wake-ups waiting for this entry to be done.
	offsets  []int64
	failures int
	// chained: the entry came from Insert (a successor the owner stored),
	// and does not count against maxHeld.
	chained bool
	// index in the queue; -1 while in flight.
	index int
}

// firing is an entry the owner must fire at At (now, or at most
// PrepareAhead from now).
type firing struct {
	Entry store.DueEntry
	// At is when to produce its run: the due time, or a retry time.
	At time.Time
	// Late: the entry was missed (first seen after its due time plus the
	// misfire threshold); a scheduled entry then goes through its job's
	// misfire policy.
	Late bool
	// Failures is how many earlier attempts to fire it failed.
	Failures int
}

// Reasons the core drops an entry without firing it.
const (
	// dropSuperseded: a later entry of its chain is in memory, so its run
	// was emitted by whoever stored that entry.
	dropSuperseded = "superseded"
	// dropCovered: a late entry of its chain, fired already, stood for it.
	dropCovered = "covered"
)

// dropped is an entry the core dropped without firing.
type dropped struct {
	Entry  store.DueEntry
	Reason string
}

// ready is what Poll asks the owner to do.
type ready struct {
	// Load is the bucket to start reading; zero for none.
	Load time.Time
	// Fire lists the entries to fire now, in due order.
	Fire []firing
	// Dropped lists the entries dropped without firing.
	Dropped []dropped
	// Deadline is when to Poll again if nothing else happens first; zero
	// means only after the next event.
	Deadline time.Time
}

// coreConfig configures a shardCore.
type coreConfig struct {
	// Floor is the shard's watermark at claim time.
	Floor time.Time
	// Lookahead: a bucket is read when now >= its start - Lookahead.
	Lookahead time.Duration
	// PrepareAhead: an entry is handed out this long before it fires, so
	// the owner can read its job and build its run in advance and produce
	// it at the firing time (firing.At).
	PrepareAhead time.Duration
	// MisfireThreshold: an entry first seen more than this after its due
	// time is late.
	MisfireThreshold time.Duration
	// MaxInflight bounds the firings handed out and not yet reported.
	MaxInflight int
	// MaxBacklog: no past bucket is read while this many entries are in
	// memory.
	MaxBacklog int
	// MaxHeld: no bucket read starts, and no page of the read in progress
	// is taken, while this many entries read or woken are in memory.
	// SetLimits changes it (and MaxInflight) as the owner's share changes.
	MaxHeld int
	// DedupeWindow: fired keys are remembered this long after their due
	// time, so a repeated wake-up does not fire an entry again.
	DedupeWindow time.Duration
	// Splay, if set, is how long after its due time an entry fires (its
	// job's herd splay, see entrySplay); a function of the entry alone, so
	// every owner fires it at the same instant.
	Splay func(store.DueEntry) time.Duration
}

type shardCore struct {
	cfg coreConfig

	floor    time.Time
	issued   time.Time
	loading  bool
	complete time.Time
	// ahead is the latest due time of the read in progress taken so far
	// (zero between reads).
	ahead time.Time

	queue    itemQueue
	items    map[key]*item
	inflight int
	// chainedHeld counts the items with chained set.
	chainedHeld int
	// fired remembers recently fired keys (to their due time, unix ms) for
	// dedupe.
	fired  map[firedKey]int64
	hasher firedHasher
	// chains tracks the scheduled entries in memory by chain; covered is
	// each chain's covered time (see above).
	chains  map[chain]*chainState
	covered map[chain]time.Time

	offsets offsetTracker
	mark    time.Time
}

func newShardCore(cfg coreConfig) *shardCore {
	floor := store.Truncate(cfg.Floor)
	first := store.BucketOf(floor.Add(time.Millisecond))
	return &shardCore{
		cfg:      cfg,
		floor:    floor,
		issued:   first,
		complete: first,
		items:    map[key]*item{},
		fired:    map[firedKey]int64{},
		hasher:   newFiredHasher(),
		chains:   map[chain]*chainState{},
		covered:  map[chain]time.Time{},
		offsets:  newOffsetTracker(),
		mark:     floor,
	}
}

// Poll returns what to do at now: a bucket to read, entries to fire, and
// when to be polled again.
func (c *shardCore) Poll(now time.Time) ready {
	var r ready
	if c.loadable(now) {
		r.Load = c.issued
		c.loading = true
		c.issued = c.issued.Add(time.Minute)
	}
	for c.queue.Len() > 0 && c.inflight < c.cfg.MaxInflight {
		head := c.queue[0]
		if head.at.Add(-c.cfg.PrepareAhead).After(now) {
			break
		}
		heap.Pop(&c.queue)
		if ch, ok := chainOf(head.entry); ok {
			st := c.chains[ch]
			if cov, ok := c.covered[ch]; ok && !head.entry.Due.After(cov) {
				c.drop(head)
				r.Dropped = append(r.Dropped, dropped{head.entry, dropCovered})
				continue
			}
			if st.latest > head.key.due {
				c.drop(head)
				r.Dropped = append(r.Dropped, dropped{head.entry, dropSuperseded})
				continue
			}
			if st.expanding != nil {
				st.parked = append(st.parked, head)
				continue
			}
			if head.late {
				st.expanding = head
			}
		}
		c.inflight++
		r.Fire = append(r.Fire, firing{Entry: head.entry, At: head.at, Late: head.late, Failures: head.failures})
	}
	if c.queue.Len() > 0 && c.inflight < c.cfg.MaxInflight {
		r.Deadline = c.queue[0].at.Add(-c.cfg.PrepareAhead)
	}
	next := c.issued.Add(-c.cfg.Lookahead) // the next read's start
	if c.loading {
		next = c.ahead.Add(-c.cfg.Lookahead) // the read's next page
	}
	if next.After(now) && (r.Deadline.IsZero() || next.Before(r.Deadline)) {
		r.Deadline = next
	}
	return r
}

// loadable says whether the next bucket's read should start at now.
func (c *shardCore) loadable(now time.Time) bool {
	if c.loading || c.issued.Add(-c.cfg.Lookahead).After(now) {
		return false
	}
	catchingUp := !c.issued.After(now)
	return c.Room(now) && (!catchingUp || len(c.items) < c.cfg.MaxBacklog)
}

// Room says whether the core takes another page of a bucket read at now: it
// holds fewer than MaxHeld entries read or woken, and what it took of the
// read in progress falls due within the look-ahead.
func (c *shardCore) Room(now time.Time) bool {
	return len(c.items)-c.chainedHeld < c.cfg.MaxHeld && !c.ahead.After(now.Add(c.cfg.Lookahead))
}

// SetLimits sets MaxInflight and MaxHeld. Lowering them hands out no more
// until the core is below them again; nothing held or in flight is dropped.
func (c *shardCore) SetLimits(maxInflight, maxHeld int) {
	c.cfg.MaxInflight, c.cfg.MaxHeld = max(maxInflight, 1), max(maxHeld, 1)
}

// Loaded takes a page of the bucket being read.
func (c *shardCore) Loaded(now time.Time, entries []store.DueEntry) {
	for _, e := range entries {
		c.ahead = maxTime(c.ahead, e.Due)
		if !e.Due.After(c.floor) {
			continue // dispatched before this claim
		}
		c.add(now, e, -1)
	}
}

// LoadDone says the bucket being read has been read to the end.
func (c *shardCore) LoadDone() {
	c.loading = false
	c.complete = c.issued
	c.ahead = time.Time{}
}

// Wake takes a wake-up record at offset for entry e. It returns whether the
// entry was taken into memory (false: already known, or beyond the window).
func (c *shardCore) Wake(now time.Time, e store.DueEntry, offset int64, leaderEpoch int32) bool {
	c.offsets.add(offset, leaderEpoch)
	return c.add(now, e, offset)
}

// WakeInvalid records a wake-up whose value could not be decoded: there is
// nothing to fire, so its offset is done.
func (c *shardCore) WakeInvalid(offset int64, leaderEpoch int32) {
	c.offsets.add(offset, leaderEpoch)
	c.offsets.resolve(offset)
}

// Insert takes an entry the owner itself stored (the next occurrence of a
// job it fired). Entries beyond the window are left to their bucket's read.
// The entry's lateness is the owner's to say, not the clock's: a busy owner
// that stores the next occurrence after it fell due has not missed it (only
// a shard without owner misses occurrences), while the rest of a capped
// catch-up is still late.
func (c *shardCore) Insert(now time.Time, e store.DueEntry, late bool) bool {
	if !c.add(now, e, -1) {
		return false
	}
	it := c.items[keyOf(e)]
	it.late = late
	it.chained = true
	c.chainedHeld++
	return true
}

// add takes an entry into memory unless it is known or beyond the window,
// attaching the wake-up offset (if not -1) to whatever holds it.
func (c *shardCore) add(now time.Time, e store.DueEntry, offset int64) bool {
	k := keyOf(e)
	if it, ok := c.items[k]; ok {
		if offset >= 0 {
			it.offsets = append(it.offsets, offset)
		}
		return false
	}
	if _, ok := c.fired[c.hasher.of(k, e.Revision)]; ok || !e.Due.Before(c.issued) {
		if offset >= 0 {
			c.offsets.resolve(offset)
		}
		return false
	}
	at := e.Due
	if c.cfg.Splay != nil {
		at = at.Add(c.cfg.Splay(e))
	}
	// Late means missed: first seen after the instant it was to fire.
	it := &item{entry: e, key: k, at: at, late: now.Sub(at) > c.cfg.MisfireThreshold}
	if offset >= 0 {
		it.offsets = []int64{offset}
	}
	c.items[k] = it
	heap.Push(&c.queue, it)
	if ch, ok := chainOf(e); ok {
		st := c.chains[ch]
		if st == nil {
			st = &chainState{}
			c.chains[ch] = st
		}
		st.n++
		st.latest = max(st.latest, k.due)
	}
	return true
}

// forget removes an item from memory: its key is remembered for dedupe, its
// wake-ups are resolved, its chain no longer counts it.
func (c *shardCore) forget(it *item) {
	delete(c.items, it.key)
	if it.chained {
		c.chainedHeld--
	}
	// Remembered from when it fired: a splayed entry fires after its due
	// time.
	c.fired[c.hasher.of(it.key, it.entry.Revision)] = max(it.key.due, it.at.UnixMilli())
	for _, o := range it.offsets {
		c.offsets.resolve(o)
	}
	if ch, ok := chainOf(it.entry); ok {
		st := c.chains[ch]
		if st.n--; st.n == 0 && st.expanding == nil && len(st.parked) == 0 {
			delete(c.chains, ch)
		}
	}
}

// drop forgets an item that was popped but not handed out.
func (c *shardCore) drop(it *item) {
	c.forget(it)
}

// settle ends the expansion of a chain whose late entry it was: the parked
// entries go back to the queue, to be checked against the covered time.
func (c *shardCore) settle(it *item) {
	ch, ok := chainOf(it.entry)
	if !ok {
		return
	}
	st := c.chains[ch]
	if st == nil || st.expanding != it {
		return
	}
	st.expanding = nil
	for _, p := range st.parked {
		heap.Push(&c.queue, p)
	}
	st.parked = nil
	if st.n == 0 {
		delete(c.chains, ch)
	}
}

// Done reports that a firing has been carried out (or found dead): the
// entry is forgotten, except for dedupe, and its wake-ups are resolved.
// covered, if set, is the time up to which the firing of a late scheduled
// entry stood for every occurrence of its chain.
func (c *shardCore) Done(e store.DueEntry, covered time.Time) {
	it, ok := c.items[keyOf(e)]
	if !ok || it.index >= 0 {
		return
	}
	c.inflight--
	if ch, ok := chainOf(e); ok && !covered.IsZero() && covered.After(c.covered[ch]) {
		c.covered[ch] = covered
	}
	c.forget(it)
	c.settle(it)
}

// Failed reports that a firing failed and should be tried again at retryAt.
func (c *shardCore) Failed(e store.DueEntry, retryAt time.Time) {
	it, ok := c.items[keyOf(e)]
	if !ok || it.index >= 0 {
		return
	}
	c.inflight--
	it.failures++
	it.at = retryAt
	heap.Push(&c.queue, it)
	c.settle(it)
}

// Watermark returns the due time up to which every entry of the shard has
// been dispatched: never past now, what the reads have not taken yet, or an
// entry in memory (waiting or in flight). It only moves forward. It also
// forgets fired keys that have left the dedupe window.
//
// The bucket being read (the one starting at complete) holds it back only
// from the latest due time its pages have brought: its rows come in due
// order, so every row due before that one has been taken, and a row written
// since has a wake-up. Rows due at that very millisecond may still be in
// the next page, hence the millisecond less. A watermark that waited for the
// whole minute would make a new owner fire up to a minute of runs again.
func (c *shardCore) Watermark(now time.Time) time.Time {
	w := store.Truncate(now)
	taken := c.complete
	if c.loading && c.ahead.After(taken) {
		taken = c.ahead
	}
	if limit := taken.Add(-time.Millisecond); limit.Before(w) {
		w = limit
	}
	for _, it := range c.items {
		if limit := it.entry.Due.Add(-time.Millisecond); limit.Before(w) {
			w = limit
		}
	}
	if w.After(c.mark) {
		c.mark = w
	}
	forget := now.Add(-c.cfg.DedupeWindow)
	forgetMs := min(forget.UnixMilli(), c.complete.UnixMilli())
	for k, due := range c.fired {
		if due < forgetMs {
			delete(c.fired, k)
		}
	}
	for ch, cov := range c.covered {
		if cov.Before(forget) && cov.Before(c.complete) {
			delete(c.covered, ch)
		}
	}
	return c.mark
}

// Commit returns the offset of sundial.shards up to which every wake-up has
// been resolved (the next offset to consume) and the leader epoch of the
// record before it; ok is false when no wake-up has been seen.
func (c *shardCore) Commit() (offset int64, leaderEpoch int32, ok bool) {
	return c.offsets.commitPoint()
}

// coreStats describes the core for metrics.
type coreStats struct {
	// Entries in memory (waiting and in flight), of those the chained
	// successors, and in flight.
	Entries, Chained, Inflight int
	// OldestOverdue is the earliest due time of an entry in memory that is
	// due by now; zero if none.
	OldestOverdue time.Time
	// Fired is the number of keys remembered for dedupe; Chains and
	// Covered the chains tracked.
	Fired, Chains, Covered int
}

func (c *shardCore) Stats(now time.Time) coreStats {
	s := coreStats{Entries: len(c.items), Chained: c.chainedHeld, Inflight: c.inflight, Fired: len(c.fired), Chains: len(c.chains), Covered: len(c.covered)}
	for _, it := range c.items {
		if !it.entry.Due.After(now) && (s.OldestOverdue.IsZero() || it.entry.Due.Before(s.OldestOverdue)) {
			s.OldestOverdue = it.entry.Due
		}
	}
	return s
}

// itemQueue is a min-heap of items by fire time, then due time, then key.
type itemQueue []*item

func (q itemQueue) Len() int { return len(q) }

func (q itemQueue) Less(i, j int) bool {
	a, b := q[i], q[j]
	if !a.at.Equal(b.at) {
		return a.at.Before(b.at)
	}
	if a.key.due != b.key.due {
		return a.key.due < b.key.due
	}
	if a.key.job != b.key.job {
		return a.key.job < b.key.job
	}
	if a.key.kind != b.key.kind {
		return a.key.kind < b.key.kind
	}
	return a.key.runID < b.key.runID
}

func (q itemQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index = i
	q[j].index = j
}

func (q *itemQueue) Push(x any) {
	it := x.(*item)
	it.index = len(*q)
	*q = append(*q, it)
}

func (q *itemQueue) Pop() any {
	old := *q
	n := len(old)
	it := old[n-1]
	old[n-1] = nil
	it.index = -1
	*q = old[:n-1]
	return it
}
