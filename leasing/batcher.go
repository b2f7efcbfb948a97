package leasing

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
)

// DefaultMaxBatch is the default number of calls a Batcher sends in one
// pipeline.
const DefaultMaxBatch = 512

// Batcher sends the Acquire, Renew, Complete and Release calls of many goroutines
// to Redis in shared pipelines, so that N runners' workers finishing together
// cost one round trip and a few system calls instead of N.
//
// Batching is natural, never timed: a call that finds no pipeline out is sent
// at once, alone; calls that arrive while a pipeline is out wait for it and
// go together in the next one. So a lone call waits for no timer, and under
// load the batch grows with the round trip. The calls of one pipeline are
// decided by Redis one after the other, in the order they arrived, with the
// same scripts and the same replies as the Store's own methods.
//
// A Batcher holds no goroutine: the caller whose call opens a pipeline sends
// it, and hands the next one to the first caller still waiting. It needs no
// Start or Stop and is safe for concurrent use.
type Batcher struct {
	store *Store
	max   int

	mu      sync.Mutex
	queue   []*batchOp
	sending bool
}

// batchOp is one call waiting in a Batcher.
type batchOp struct {
	sc   scriptCall
	done chan batchReply
}

// batchReply answers a batchOp: its script's reply, or lead when its caller
// is to send the next pipeline (its own call included) before it gets one.
type batchReply struct {
	v    any
	err  error
	lead bool
}

// NewBatcher returns a Batcher over s that sends at most maxBatch calls per
// pipeline; 0 means DefaultMaxBatch.
func NewBatcher(s *Store, maxBatch int) *Batcher {
	if maxBatch <= 0 {
		maxBatch = DefaultMaxBatch
	}
	return &Batcher{store: s, max: maxBatch}
}

// Acquire is Store.Acquire, sent in a shared pipeline.
func (b *Batcher) Acquire(ctx context.Context, req Request) (Lease, error) {
	if err := req.validate(); err != nil {
		return Lease{}, err
	}
	// Trust is measured from before the call is queued, which is before it
	// reaches the server.
	start := b.store.cfg.Now()
	v, err := b.do(ctx, scriptCall{sc: b.store.scripts.acquire, c: b.store.acquireCall(req)})
	if err != nil {
		return Lease{}, fmt.Errorf("leasing: acquire job %s run %s: %w", req.JobID, req.RunID, err)
	}
	return b.store.acquired(req, start, v)
}

// Renew is Store.Renew, sent in a shared pipeline. The renewed lease's
// trust is measured from before the call is queued.
func (b *Batcher) Renew(ctx context.Context, l Lease) (Lease, error) {
	if err := validateLease(l); err != nil {
		return Lease{}, err
	}
	start := b.store.cfg.Now()
	v, err := b.do(ctx, scriptCall{sc: b.store.scripts.renew, c: b.store.renewCall(l)})
	return b.store.renewed(l, start, v, err)
}

// NewKeeper returns a Keeper for l whose renewals go through b, so that the
// renewals of many runs falling due together share pipelines. A nil logger
// discards.
func (b *Batcher) NewKeeper(l Lease, logger *slog.Logger) *Keeper {
	return newKeeper(b.store.cfg.Now, b.Renew, l, logger)
}

// Complete is Store.Complete, sent in a shared pipeline.
func (b *Batcher) Complete(ctx context.Context, l Lease) error {
	if err := validateLease(l); err != nil {
		return err
	}
	v, err := b.do(ctx, scriptCall{sc: b.store.scripts.complete, c: b.store.completeCall(l)})
	return b.store.held("complete", l, v, err)
}

// Release is Store.Release, sent in a shared pipeline.
func (b *Batcher) Release(ctx context.Context, l Lease) error {
	if err := validateLease(l); err != nil {
		return err
	}
	v, err := b.do(ctx, scriptCall{sc: b.store.scripts.release, c: b.store.releaseCall(l)})
	return b.store.held("release", l, v, err)
}

// do queues one call and returns its reply. A call whose context has ended
// is not queued; once queued it is sent whatever happens to its context (a
// call cannot be taken back from a pipeline), bounded by the client's own
// read and write timeouts.
func (b *Batcher) do(ctx context.Context, c scriptCall) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	op := &batchOp{sc: c, done: make(chan batchReply, 1)}
	b.mu.Lock()
	b.queue = append(b.queue, op)
	lead := !b.sending
	b.sending = true
	b.mu.Unlock()
	if lead {
		b.send(ctx)
	}
	rep := <-op.done
	if rep.lead {
		b.send(ctx)
		rep = <-op.done
	}
	return rep.v, rep.err
}

// send sends the oldest queued calls, at most max, in one pipeline; the
// caller's own call is the first of them. Then it hands the sending of the
// rest to the first caller still waiting, so no caller sends for others
// longer than one round trip.
func (b *Batcher) send(ctx context.Context) {
	b.mu.Lock()
	n := min(len(b.queue), b.max)
	ops := make([]*batchOp, n)
	copy(ops, b.queue)
	b.queue = append(b.queue[:0], b.queue[n:]...)
	b.mu.Unlock()

	calls := make([]scriptCall, n)
	for i, op := range ops {
		calls[i] = op.sc
	}
	vals, errs := b.store.evalPipeline(context.WithoutCancel(ctx), calls)
	for i, op := range ops {
		op.done <- batchReply{v: vals[i], err: errs[i]}
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		b.sending = false
		return
	}
	b.queue[0].done <- batchReply{lead: true}
}
