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
	// seq is the item's place in the order of every Push, for PopOldest.
	seq uint64
}

// Queues holds fetched items per priority.
type Queues[T any] struct {
	weights [Levels]float64
	aging   time.Duration
	q       [Levels][]item[T]
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

// Push appends v to level's queue, fetched at now.
func (q *Queues[T]) Push(level int, v T, now time.Time) {
	q.pushes++
	q.q[level] = append(q.q[level], item[T]{v: v, at: now, seq: q.pushes})
	q.size++
}

// Len is the number of items of level.
func (q *Queues[T]) Len(level int) int { return len(q.q[level]) }

// Size is the number of items of every level.
func (q *Queues[T]) Size() int { return q.size }

// weight is level's effective weight at now.
func (q *Queues[T]) weight(level int, now time.Time) float64 {
	wait := max(now.Sub(q.q[level][0].at), 0)
	return q.weights[level] * (1 + float64(wait)/float64(q.aging))
}

// Pop takes the next item at now: the head of the level whose accumulated
// credit is largest after each non-empty level earned its effective weight.
// ok is false when every queue is empty.
func (q *Queues[T]) Pop(now time.Time) (v T, level int, ok bool) {
	best, total := -1, 0.0
	for l := range Levels {
		if len(q.q[l]) == 0 {
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
	return q.take(best)
}

// PopOldest takes the item pushed first, whatever its level: arrival
// order, with no weights. ok is false when every queue is empty.
func (q *Queues[T]) PopOldest() (v T, level int, ok bool) {
	best := -1
	for l := range Levels {
		if len(q.q[l]) > 0 && (best < 0 || q.q[l][0].seq < q.q[best][0].seq) {
			best = l
		}
	}
	if best < 0 {
		return v, 0, false
	}
	return q.take(best)
}

// take removes and returns the head of level best.
func (q *Queues[T]) take(best int) (v T, level int, ok bool) {
	it := q.q[best][0]
	var zero item[T]
	q.q[best][0] = zero
	q.q[best] = q.q[best][1:]
	if len(q.q[best]) == 0 {
		q.q[best] = nil // let the backing array go
	}
	q.size--
	return it.v, best, true
}

// Remove drops every item for which drop returns true (records of revoked
// partitions) and returns how many it dropped.
func (q *Queues[T]) Remove(drop func(T) bool) int {
	n := 0
	for l := range Levels {
		kept := q.q[l][:0]
		for _, it := range q.q[l] {
			if drop(it.v) {
				n++
				continue
			}
			kept = append(kept, it)
		}
		for i := len(kept); i < len(q.q[l]); i++ {
			q.q[l][i] = item[T]{}
		}
		q.q[l] = kept
	}
	q.size -= n
	return n
}
