package priority

import (
	"fmt"
	"time"
)

// Levels is the number of priorities: 0 high, 1 default, 2 low.
const Levels = 3

// DefaultWeights are the shares of high, default and low.
var DefaultWeights = [Levels]int{6, 3, 1}

// DefaultAging is the wait that adds one weight unit per weight unit.
const DefaultAging = 5 * time.Second

type item[T any] struct {
	v  T
	at time.Time
	// seq is the item's place in the order of every push, for PopOldest.
	seq uint64
}

// lane is the FIFO of one group (a team) within a level.
type lane[T any] struct {
	group string
	items []item[T]
}

// level is the queue of one priority: a lane per group with items, drained
// round robin, one item per turn.
type level[T any] struct {
	lanes   []*lane[T] // non-empty lanes, in turn order
	byGroup map[string]*lane[T]
	next    int // index in lanes of the lane whose turn it is
	n       int
}

func (l *level[T]) push(group string, it item[T]) {
	ln := l.byGroup[group]
	if ln == nil {
		ln = &lane[T]{group: group}
		if l.byGroup == nil {
			l.byGroup = map[string]*lane[T]{}
		}
		l.byGroup[group] = ln
		l.lanes = append(l.lanes, ln)
	}
	ln.items = append(ln.items, it)
	l.n++
}

// oldest is when the level's oldest item was pushed: the earliest head of
// its lanes (each lane is FIFO). The level must not be empty.
func (l *level[T]) oldest() time.Time {
	at := l.lanes[0].items[0].at
	for _, ln := range l.lanes[1:] {
		if ln.items[0].at.Before(at) {
			at = ln.items[0].at
		}
	}
	return at
}

// pop takes the head of the lane whose turn it is and passes the turn on.
// The level must not be empty.
func (l *level[T]) pop() item[T] {
	i := l.next
	it, emptied := l.takeHead(i)
	if !emptied {
		// Otherwise the next lane moved into index i: the turn is its.
		l.next++
	}
	if l.next >= len(l.lanes) {
		l.next = 0
	}
	return it
}

// oldestLane is the index of the lane whose head was pushed first. The level
// must not be empty.
func (l *level[T]) oldestLane() int {
	best := 0
	for i, ln := range l.lanes[1:] {
		if ln.items[0].seq < l.lanes[best].items[0].seq {
			best = i + 1
		}
	}
	return best
}

// takeHead removes the head of lane i, and the lane when that empties it
// (emptied), keeping the turn on the lane that had it.
func (l *level[T]) takeHead(i int) (it item[T], emptied bool) {
	ln := l.lanes[i]
	it = ln.items[0]
	ln.items[0] = item[T]{}
	ln.items = ln.items[1:]
	l.n--
	if len(ln.items) > 0 {
		return it, false
	}
	l.lanes = append(l.lanes[:i], l.lanes[i+1:]...)
	delete(l.byGroup, ln.group)
	if i < l.next {
		l.next--
	}
	return it, true
}

// Queues holds fetched items per priority, and within a priority per group.
type Queues[T any] struct {
	weights [Levels]float64
	aging   time.Duration
	q       [Levels]level[T]
	credit  [Levels]float64
	size    int
	pushes  uint64
}

// New returns empty queues. Weights must be positive and aging positive.
func New[T any](weights [Levels]int, aging time.Duration) (*Queues[T], error) {
	q := &Queues[T]{aging: aging}
	for i, w := range weights {
		if w <= 0 {
			return nil, fmt.Errorf("priority: weight of level %d: %d is not positive", i, w)
		}
		q.weights[i] = float64(w)
	}
	if aging <= 0 {
		return nil, fmt.Errorf("priority: aging %s is not positive", aging)
	}
	return q, nil
}

// Push appends v to level's queue, fetched at now, in the group "".
func (q *Queues[T]) Push(level int, v T, now time.Time) { q.PushGroup(level, "", v, now) }

// PushGroup appends v to group's lane of level, fetched at now. The lanes
// of a level take turns: one group's flood delays another group's items by
// one turn per item ahead of them in the same lane, not by the flood.
func (q *Queues[T]) PushGroup(level int, group string, v T, now time.Time) {
	q.pushes++
	q.q[level].push(group, item[T]{v: v, at: now, seq: q.pushes})
	q.size++
}

// Len is the number of items of level.
func (q *Queues[T]) Len(level int) int { return q.q[level].n }

// CappedLen is the number of items of level counting at most limit of each
// group: what a group holds beyond limit is left out.
func (q *Queues[T]) CappedLen(level, limit int) int {
	n := 0
	for _, ln := range q.q[level].lanes {
		n += min(len(ln.items), limit)
	}
	return n
}

// Size is the number of items of every level.
func (q *Queues[T]) Size() int { return q.size }

// weight is level's effective weight at now.
func (q *Queues[T]) weight(level int, now time.Time) float64 {
	wait := max(now.Sub(q.q[level].oldest()), 0)
	return q.weights[level] * (1 + float64(wait)/float64(q.aging))
}

// Pop takes the next item at now: the head of the level whose accumulated
// credit is largest after each non-empty level earned its effective weight.
// ok is false when every queue is empty.
func (q *Queues[T]) Pop(now time.Time) (v T, level int, ok bool) {
	best, total := -1, 0.0
	for l := range Levels {
		if q.q[l].n == 0 {
			// An idle level does not save up credit for later.
			q.credit[l] = 0
			continue
		}
		w := q.weight(l, now)
		q.credit[l] += w
		total += w
		if best < 0 || q.credit[l] > q.credit[best] {
			best = l
		}
	}
	if best < 0 {
		return v, 0, false
	}
	q.credit[best] -= total
	it := q.q[best].pop()
	q.size--
	return it.v, best, true
}

// PopOldest takes the item pushed first, whatever its level and group:
// arrival order, with no weights and no turns. ok is false when every queue
// is empty.
func (q *Queues[T]) PopOldest() (v T, level int, ok bool) {
	best, bestLane := -1, 0
	for l := range Levels {
		if q.q[l].n == 0 {
			continue
		}
		i := q.q[l].oldestLane()
		if best < 0 || q.q[l].lanes[i].items[0].seq < q.q[best].lanes[bestLane].items[0].seq {
			best, bestLane = l, i
		}
	}
	if best < 0 {
		return v, 0, false
	}
	it, _ := q.q[best].takeHead(bestLane)
	q.size--
	return it.v, best, true
}

// Remove drops every item for which drop returns true (records of revoked
// partitions) and returns how many it dropped.
func (q *Queues[T]) Remove(drop func(T) bool) int {
	n := 0
	for l := range Levels {
		lv := &q.q[l]
		lanes := lv.lanes[:0]
		for _, ln := range lv.lanes {
			kept := ln.items[:0]
			for _, it := range ln.items {
				if drop(it.v) {
					n++
					continue
				}
				kept = append(kept, it)
			}
			clear(ln.items[len(kept):])
			ln.items = kept
			if len(kept) == 0 {
				delete(lv.byGroup, ln.group)
				continue
			}
			lanes = append(lanes, ln)
		}
		clear(lv.lanes[len(lanes):])
		lv.lanes = lanes
		lv.n = 0
		for _, ln := range lanes {
			lv.n += len(ln.items)
		}
		if lv.next >= len(lanes) {
			lv.next = 0
		}
	}
	q.size -= n
	return n
}
