package runner

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/sundialhq/sundial/discovery"
	"github.com/sundialhq/sundial/internal/lifecycle"
)

// PoolBlocking is what an executor does with a run of its pool when all of
// the pool's slots on it are busy. It is set on the executor, not on the
// job: it describes how much one process may take on at once (its CPU,
// memory, a licence per host), which the operator of the executor knows
// and the author of a job does not; the job keeps its overlap policy,
// which limits its own runs across all executors.
type PoolBlocking string

// Blocking policies.
const (
	// BlockingConcurrent runs up to PoolSlots runs at once; a run that
	// finds them busy waits, and the next free slot goes to the run the
	// priority weights pick (a later high-priority run may pass an earlier
	// low-priority one). The default.
	BlockingConcurrent PoolBlocking = "concurrent"
	// BlockingFIFO runs up to PoolSlots runs at once; runs that find them
	// busy wait and start strictly in the order the executor received
	// them, whatever their priority.
	BlockingFIFO PoolBlocking = "fifo"
	// BlockingDiscard runs up to PoolSlots runs at once; a run that finds
	// them busy is recorded as SKIPPED with reason "pool_busy" and is not
	// retried. It needs Concurrency above PoolSlots: the workers beyond
	// the slots are the ones that take the runs to discard.
	BlockingDiscard PoolBlocking = "discard"
)

// ParsePoolBlocking returns the policy named s.
func ParsePoolBlocking(s string) (PoolBlocking, error) {
	switch b := PoolBlocking(s); b {
	case BlockingConcurrent, BlockingFIFO, BlockingDiscard:
		return b, nil
	}
	return "", fmt.Errorf("pool blocking %q: want fifo, discard or concurrent", s)
}

// reasonPoolBusy is the reason of a run skipped by BlockingDiscard.
const reasonPoolBusy = "pool_busy"

// poolGate holds the pool's slots on this executor: a token per run
// executing. FIFO and concurrent take a slot before a worker takes a
// record, so waiting runs stay in the queue, in their order; discard takes
// one after, and a record that finds none is discarded.
type poolGate struct {
	blocking PoolBlocking
	slots    chan struct{}
	// executing counts the records admitted and not yet left: a slot
	// reserved by a worker still waiting for a record is not a run.
	executing atomic.Int64
}

func newPoolGate(blocking PoolBlocking, slots int) *poolGate {
	return &poolGate{blocking: blocking, slots: make(chan struct{}, slots)}
}

// reserve waits for a slot before a record is taken (FIFO, concurrent) and
// reports false when ctx ends first. With discard it takes nothing.
func (g *poolGate) reserve(ctx context.Context) bool {
	if g.blocking == BlockingDiscard {
		return true
	}
	select {
	case g.slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// admit is called with a record taken; it reports whether the record holds
// a slot. With discard it takes a free slot or none.
func (g *poolGate) admit() bool {
	if g.blocking == BlockingDiscard {
		select {
		case g.slots <- struct{}{}:
		default:
			return false
		}
	}
	g.executing.Add(1)
	return true
}

// unreserve gives back the slot reserve took for a record that never came.
func (g *poolGate) unreserve() {
	if g.blocking != BlockingDiscard {
		<-g.slots
	}
}

// leave gives back the slot of an admitted record.
func (g *poolGate) leave() {
	g.executing.Add(-1)
	<-g.slots
}

// inFlight is the runs of the pool executing (admitted, not yet left).
func (g *poolGate) inFlight() int { return int(g.executing.Load()) }

// announce starts the Announcer of the runner of cfg on sundial.executors,
// telling its pool's busy slots (pool) and the handlers it serves
// (handlers); run stops it, which writes the tombstone.
func announce(ctx context.Context, run *lifecycle.Run, cfg *Config, log *slog.Logger, pool *poolGate, handlers func() []discovery.ServedHandler) error {
	a, err := discovery.NewAnnouncer(discovery.AnnouncerConfig{
		Kafka: cfg.Kafka, Topics: cfg.Topics, ID: cfg.ID, Pool: cfg.Pool, Labels: cfg.Labels,
		Version: cfg.Version, Blocking: string(cfg.PoolBlocking), Capacity: cfg.PoolSlots,
		InFlight: pool.inFlight, Interval: cfg.AnnounceInterval, Logger: log, Now: cfg.Now,
		Handlers: handlers,
	})
	if err != nil {
		return err
	}
	if err := a.Start(ctx); err != nil {
		return err
	}
	run.OnStop(a.Stop)
	return nil
}
