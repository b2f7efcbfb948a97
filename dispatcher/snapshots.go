package dispatcher

import (
	"hash/maphash"
	"time"

	"github.com/sundialhq/sundial/store"
)

// Definitions carried by the entries.
//
// A scheduled entry carries a snapshot of its job at the entry's revision
// (store.JobSnapshot): the registry writes it with the first occurrence,
// and each firing writes it into the successor it chains. A firing that may
// use it reads nothing; the entry is live when the job has had no change
// since the snapshot, and the jobs feed says which jobs changed.
//
// The feed records, for every answer of the registry it reads on
// sundial.jobs.status that may stand for a change, the revision it is for
// (the offset of the definition or tombstone in sundial.jobs), by job
// (changeLog). A job's creation is not a change (no snapshot of it can be
// older), and a record the registry did not accept counts as a change just
// past its revision (answeredRevision). A snapshot of revision r checked at
// CheckedAt may stand for the job at now when:
//
//   - the feed is fresh up to maxLag ago (as for definitions in memory);
//   - the change log holds every change seen since CheckedAt: CheckedAt is
//     at or after the log's start (the start of the feed's replay, read by
//     its first catch-up: jobfeed.go; or the end of the changes it forgot
//     to stay bounded) plus snapshotClockSkew;
//   - and no change of the job with a revision above r is in the log.
//
// Any change of the job after CheckedAt is answered after it, so the feed
// has it (or has forgotten it, which moves the log's start past
// CheckedAt). A change, a pause or a delete is therefore honoured as with a
// read: the entry is not trusted, and its firing reads the job (from memory
// or the store), finds the revision moved on, and drops the entry as dead.
// CheckedAt is the definition's UpdatedAt for the registry's entry (nothing
// newer can have been stored before it was produced), and for a chained
// successor the time up to which the feed had applied every change when the
// predecessor was planned (or when its job was read). A firing whose
// snapshot may not be used (a dispatcher whose feed has not caught up, an
// entry checked before the feed's replay, a job that changed) reads its job as
// before, and the successor it chains carries a snapshot checked at that
// read, so the next firing of the chain reads nothing.
//
// The log's memory is bounded: two generations of at most changesHeld/2
// jobs each, keyed by a 64-bit hash of the id (a collision can only make a
// snapshot untrusted, never trusted). When the newer generation fills, the
// older one is forgotten and the log's start moves to the time the newer
// one began.

// snapshotClockSkew bounds how far the clocks that stamp CheckedAt (the
// definition's producer, the dispatchers) may run ahead of this
// dispatcher's: a snapshot checked that close to the log's start is not
// trusted.
const snapshotClockSkew = 5 * time.Second

// defaultChangesHeld bounds the jobs the change log holds: about 30 MB when
// full. Creations are not held, so registering new jobs fills none of it.
const defaultChangesHeld = 1 << 20

// changeLog is the revisions of the changes seen since from, by job.
type changeLog struct {
	seed      maphash.Seed
	cur, prev map[uint64]int64
	perGen    int
	// from: every change seen since from is held; zero until the feed
	// has first caught up. began is when cur began.
	from, began time.Time
}

func newChangeLog(held int) changeLog {
	return changeLog{seed: maphash.MakeSeed(), cur: map[uint64]int64{}, perGen: max(held/2, 1)}
}

// start records that the feed has applied every change answered before t.
// The first call starts the log: answers before t were never read.
func (l *changeLog) start(t time.Time) {
	if l.from.IsZero() {
		l.from, l.began = t, t
	}
}

// add records a change of job id to revision rev, seen at now.
func (l *changeLog) add(id string, rev int64, now time.Time) {
	if len(l.cur) >= l.perGen {
		// prev held the changes seen before began; forgetting them
		// means the log starts at began.
		if l.prev != nil {
			l.from = maxTime(l.from, l.began)
		}
		l.prev, l.cur, l.began = l.cur, make(map[uint64]int64, l.perGen), now
	}
	h := maphash.String(l.seed, id)
	if rev > l.cur[h] {
		l.cur[h] = rev
	}
}

// latest returns the highest revision of a change of job id in the log.
func (l *changeLog) latest(id string) (int64, bool) {
	h := maphash.String(l.seed, id)
	a, okA := l.cur[h]
	b, okB := l.prev[h]
	return max(a, b), okA || okB
}

// covers says whether the log shows that the snapshot s of entry e is still
// the job's: it holds every change since s.CheckedAt, and none of them is
// newer than e's revision.
func (l *changeLog) covers(e store.DueEntry, s store.JobSnapshot) bool {
	if l.from.IsZero() || s.CheckedAt.Before(l.from.Add(snapshotClockSkew)) {
		return false
	}
	rev, changed := l.latest(e.JobID)
	return !changed || rev <= e.Revision
}

// snapshotOf returns the snapshot a scheduled entry carries, if it does.
func snapshotOf(e store.DueEntry) (store.JobSnapshot, bool) {
	if e.Kind != store.KindScheduled || len(e.Payload) == 0 {
		return store.JobSnapshot{}, false
	}
	s, err := store.DecodeSnapshot(e.Payload)
	return s, err == nil
}

// snapshotUsable says whether entry e's snapshot s may stand for its job at
// now, and returns the time up to which that is known: the CheckedAt of
// the successor chained from it.
func (c *jobCache) snapshotUsable(e store.DueEntry, s store.JobSnapshot, now time.Time) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.usableLocked(now) || !c.changes.covers(e, s) {
		return time.Time{}, false
	}
	return c.fresh, true
}

// snapshotLikely says whether e carries a snapshot its firing will use,
// unless the job changes meanwhile: its job need not be read ahead.
func (c *jobCache) snapshotLikely(e store.DueEntry) bool {
	s, ok := snapshotOf(e)
	if !ok {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changes.covers(e, s)
}

// changed records the feed's answer for job id at revision rev (a change,
// or an answer that may stand for one).
func (c *jobCache) changed(id string, rev int64) {
	now := c.now()
	c.mu.Lock()
	c.changes.add(id, rev, now)
	c.mu.Unlock()
}
