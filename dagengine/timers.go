package dagengine

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sundialhq/sundial/dagengine/dagrun"
	"github.com/sundialhq/sundial/store"
)

// deadlines tracks the next node deadline of each DAG run this instance has
// touched: a min-heap of (deadline, run) with lazy deletion, and the current
// deadline per run. Runs nobody here touched are covered by the sweep.
type deadlines struct {
	mu      sync.Mutex
	current map[string]time.Time
	h       deadlineHeap
	changed chan struct{}
}

type deadlineEntry struct {
	at time.Time
	id string
}

type deadlineHeap []deadlineEntry

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h deadlineHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *deadlineHeap) Push(x any)        { *h = append(*h, x.(deadlineEntry)) }
func (h *deadlineHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func newDeadlines() *deadlines {
	return &deadlines{current: map[string]time.Time{}, changed: make(chan struct{}, 1)}
}

func (d *deadlines) set(id string, at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if cur, ok := d.current[id]; ok && cur.Equal(at) {
		return
	}
	d.current[id] = at
	heap.Push(&d.h, deadlineEntry{at: at, id: id})
	select {
	case d.changed <- struct{}{}:
	default:
	}
}

func (d *deadlines) remove(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.current, id)
}

// next returns the earliest live deadline.
func (d *deadlines) next() (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for d.h.Len() > 0 {
		top := d.h[0]
		if cur, ok := d.current[top.id]; ok && cur.Equal(top.at) {
			return top.at, true
		}
		heap.Pop(&d.h) // superseded or removed
	}
	return time.Time{}, false
}

// due removes and returns the runs whose deadline is at or before now.
func (d *deadlines) due(now time.Time) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for d.h.Len() > 0 && !d.h[0].at.After(now) {
		top := heap.Pop(&d.h).(deadlineEntry)
		if cur, ok := d.current[top.id]; ok && cur.Equal(top.at) {
			delete(d.current, top.id)
			out = append(out, top.id)
		}
	}
	return out
}

// timerLoop sleeps until the earliest deadline and ticks the runs due: a
// timer, never a poll. A failed tick is tried again after RetryMin.
func (e *Engine) timerLoop(ctx context.Context) {
	for {
		var (
			fire  <-chan time.Time
			timer *time.Timer
		)
		if at, ok := e.timer.next(); ok {
			timer = time.NewTimer(max(at.Sub(e.cfg.Now()), 0))
			fire = timer.C
		}
		select {
		case <-ctx.Done():
		case <-e.timer.changed:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
		for _, id := range e.timer.due(e.cfg.Now()) {
			if _, err := e.runs.Apply(ctx, id, dagrun.Tick{}); err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, ErrPermanent) {
				if ctx.Err() != nil {
					return
				}
				e.cfg.Logger.Warn("deadline check failed; trying again", "dag_run", id, "err", err)
				e.timer.set(id, e.cfg.Now().Add(e.cfg.RetryMin))
			}
		}
	}
}
