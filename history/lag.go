package history

import (
	"sync"
	"time"
)

// lag tracks how far the writer is behind on each partition it owns, for the
// consumer-lag gauges. It is updated by the consuming goroutine and read at
// scrape time, so it takes the time as an argument and holds a mutex.
type lag struct {
	mu    sync.Mutex
	parts map[int32]*partLag
}

// partLag is one partition's position.
type partLag struct {
	// behind is the records of the partition not yet stored: its high
	// watermark at the last fetch minus the next offset to store.
	behind int64
	// oldest is the time of the oldest event fetched and not yet stored;
	// zero when every fetched event is stored.
	oldest time.Time
	// last is the time of the newest event stored: the events still behind
	// were produced after it, so now − last bounds their age.
	last time.Time
}

func newLag() *lag { return &lag{parts: map[int32]*partLag{}} }

func (l *lag) part(p int32) *partLag {
	pl := l.parts[p]
	if pl == nil {
		pl = &partLag{}
		l.parts[p] = pl
	}
	return pl
}

// fetched records a poll's records of partition p: first is the offset and
// time of the first, hwm the partition's high watermark.
func (l *lag) fetched(p int32, firstOffset int64, first time.Time, hwm int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	pl := l.part(p)
	pl.behind = max(hwm-firstOffset, 0)
	pl.oldest = first
}

// stored records that partition p's records up to lastOffset, the newest of
// time last, are stored.
func (l *lag) stored(p int32, lastOffset int64, last time.Time, hwm int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	pl := l.part(p)
	pl.behind = max(hwm-lastOffset-1, 0)
	pl.oldest = time.Time{}
	pl.last = last
}

// forget drops partitions the writer no longer owns.
func (l *lag) forget(ps []int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range ps {
		delete(l.parts, p)
	}
}

// reset forgets every partition: a new group membership starts with none.
func (l *lag) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.parts)
}

// records is the sum of the records behind over the owned partitions.
func (l *lag) records() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for _, pl := range l.parts {
		n += pl.behind
	}
	return n
}

// seconds is, at now, the age of the oldest event not yet stored over the
// owned partitions: exact for an event fetched and being stored, an upper
// bound (now − the newest stored event) for events not fetched yet, and 0
// when nothing is behind.
func (l *lag) seconds(now time.Time) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var worst time.Duration
	for _, pl := range l.parts {
		if pl.behind == 0 {
			continue
		}
		from := pl.oldest
		if from.IsZero() {
			from = pl.last
		}
		if from.IsZero() {
			continue
		}
		worst = max(worst, now.Sub(from))
	}
	return worst.Seconds()
}
