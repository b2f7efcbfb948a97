package dagengine

import (
	"sync"
	"time"

	"github.com/sundialhq/sundial/dagengine/dagrun"
)

// workKey names one piece of saved, unacknowledged work of a DAG run: the
// start of a node generation, or an event of the outbox.
type workKey struct {
	run  string
	node string
	gen  int
	seq  uint64
}

// work decides who carries out saved work, so that instances do not all
// redo each other's work the moment it is saved. Work this process saved is
// its own to carry out; work someone else saved is left to them for
// RedriveAfter (measured from the decision's time), then anyone may redo it:
// its saver has died or lost its way. Within the process, one goroutine at a
// time carries out a piece of work.
type work struct {
	mu       sync.Mutex
	mine     map[workKey]bool
	inflight map[workKey]bool
}

func newWork() *work {
	return &work{mine: map[workKey]bool{}, inflight: map[workKey]bool{}}
}

// saved records the work that decisions this process saved created.
func (w *work) saved(run string, decisions []dagrun.Decision) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, d := range decisions {
		switch d := d.(type) {
		case dagrun.StartNode:
			w.mine[workKey{run: run, node: d.Node, gen: d.Gen}] = true
		case dagrun.Publish:
			w.mine[workKey{run: run, seq: d.Event.Seq}] = true
		}
	}
}

// claimed is the work one goroutine took from a state.
type claimed struct {
	nodes  []int // positions of starting nodes
	events []dagrun.Event
	keys   []workKey
}

func (c *claimed) empty() bool { return len(c.keys) == 0 }

// claim takes the state's pending work this goroutine may carry out now.
func (w *work) claim(st *dagrun.State, now time.Time, redriveAfter time.Duration) *claimed {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := &claimed{}
	take := func(k workKey, at time.Time) bool {
		if w.inflight[k] || (!w.mine[k] && now.Sub(at) < redriveAfter) {
			return false
		}
		w.inflight[k] = true
		c.keys = append(c.keys, k)
		return true
	}
	for i, n := range st.Nodes {
		if n.Phase == dagrun.Starting && take(workKey{run: st.DagRunID, node: n.ID, gen: n.Gen}, n.StartedAt) {
			c.nodes = append(c.nodes, i)
		}
	}
	for _, e := range st.Outbox {
		if take(workKey{run: st.DagRunID, seq: e.Seq}, e.Time) {
			c.events = append(c.events, e)
		}
	}
	return c
}

// release ends a claim. Work that was acknowledged is forgotten; work that
// was not stays this process's, to be tried again.
func (w *work) release(c *claimed, acknowledged bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range c.keys {
		delete(w.inflight, k)
		if acknowledged {
			delete(w.mine, k)
		}
	}
}
