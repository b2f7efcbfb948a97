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

// DefaultPipelines is the default number of pipelines a Batcher has out at
// once. With one, every call waited for the pipeline before it and for the
// hand-over to the next sender: on a busy machine at 2,000 runs/s, a
// runner's workers queued by the thousand behind it while Redis was mostly
// idle.
const DefaultPipelines = 4

// Batcher sends the Acquire, Renew, Complete and Release calls of many goroutines
// to Redis in shared pipelines, so that N runners' workers finishing together
// cost one round trip and a few system calls instead of N.
//
// Batching is natural, never timed: a call that finds fewer than the
// Batcher's pipelines out is sent at once, alone; calls that arrive while
// they are all out wait, and go together in the next one that frees. So a
// lone call waits for no timer, and under load the batches grow with the
// round trip. The calls of one pipeline are decided by Redis one after the
// other, in the order they arrived, with the same scripts and the same
// replies as the Store's own methods; calls in different pipelines were in
// flight at the same time, so neither was waiting for the other.
//
// A Batcher holds no goroutine: the caller whose call opens a pipeline sends
// it, and hands the next one to the first caller still waiting. It needs no
// Start or Stop and is safe for concurrent use. Calls queue only while all
// pipelines are out, so a caller that opens one finds the queue empty: its
// call goes first, and the queue stays in arrival order.
type Batcher struct {
	store     *Store
	max       int
	pipelines int

	mu      sync.Mutex
	queue   []*batchOp
	sending int // pipelines out
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
// pipeline and has at most pipelines out at once; 0 means DefaultMaxBatch
// and DefaultPipelines.
func NewBatcher(s *Store, maxBatch, pipelines int) *Batcher {
	if maxBatch <= 0 {
		maxBatch = DefaultMaxBatch
	}
	if pipelines <= 0 {
		pipelines = DefaultPipelines
	}
	return &Batcher{store: s, max: maxBatch, pipelines: pipelines}
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
	lead := b.sending < b.pipelines
	if lead {
		b.sending++
	} else {
		b.queue = append(b.queue, op)
	}
	b.mu.Unlock()
	if !lead {
		rep := <-op.done
		if !rep.lead {
			return rep.v, rep.err
		}
	}
	b.send(ctx, op)
	rep := <-op.done
	return rep.v, rep.err
}

// send sends own, the caller's call, with the oldest queued calls, at most
// max in all, in one pipeline. Then it hands the pipeline to the first
// caller still waiting, taking that caller's call out of the queue, so no
// caller sends for others longer than one round trip and no call is sent
// twice.
func (b *Batcher) send(ctx context.Context, own *batchOp) {
	b.mu.Lock()
	n := min(len(b.queue), b.max-1)
	ops := make([]*batchOp, 0, n+1)
	ops = append(ops, own)
	ops = append(ops, b.queue[:n]...)
	b.queue = append(b.queue[:0], b.queue[n:]...)
	b.mu.Unlock()

	calls := make([]scriptCall, len(ops))
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
		b.sending--
		return
	}
	next := b.queue[0]
	b.queue = append(b.queue[:0], b.queue[1:]...)
	next.done <- batchReply{lead: true}
}
