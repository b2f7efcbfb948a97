package dispatcher

import (
	"context"
	"sync"
	"time"

	"github.com/sundialhq/sundial/store"
)

// nextWriters is how many PutDue calls of next occurrences one dispatcher
// has in flight at once.
const nextWriters = 4

// nextGather is how long the nextWriter gathers next occurrences before it
// writes them. A next occurrence is written after its run was produced, so
// gathering delays no run: it keeps the firing (and the watermark behind
// it) waiting up to this much longer, and turns the single-row writes of
// firings that finish a few milliseconds apart into one batch. Without it,
// at 200 firings/s, 0.62 Cassandra requests per run were next occurrences
// (mostly single rows); with it, see docs/architecture.md ("The work of
// one run").
const nextGather = 50 * time.Millisecond

// maxPutBatch bounds the entries of one PutDue call of a nextWriter.
const maxPutBatch = 512

// putRequest asks the nextWriter to store an entry; the outcome goes to
// done (buffered).
type putRequest struct {
	entry store.DueEntry
	done  chan error
}

// dueWriter is what a nextWriter needs of the store.
type dueWriter interface {
	PutDue(ctx context.Context, entries ...store.DueEntry) error
}

// nextWriter stores the next occurrences the firings of every owned shard
// hand it: a group commit across the dispatcher's shards. Its collector
// gathers the requests that arrive within gather of the first one (or
// while every writer is busy, up to maxPutBatch), and hands them to one of
// its writers, which stores them in one PutDue call; the store writes them
// as few batches (store/cassandra lets one batch span the partitions of
// several shards when every node replicates every partition). A shard
// fires a few entries a second at most rates, so a writer per shard wrote
// one entry per call. It is started with the dispatcher and stopped after
// every owner has drained: a revoked shard's firings still finish.
type nextWriter struct {
	store   dueWriter
	timeout time.Duration
	gather  time.Duration
	in      chan putRequest
	batches chan []putRequest
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// startNextWriter starts a collector gathering for gather and writers
// goroutines storing through st, each write bounded by timeout. They keep
// ctx's values, not its end: Stop ends them.
func startNextWriter(ctx context.Context, st dueWriter, timeout time.Duration, writers int, gather time.Duration) *nextWriter {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w := &nextWriter{store: st, timeout: timeout, gather: gather, in: make(chan putRequest), batches: make(chan []putRequest), cancel: cancel}
	w.wg.Go(func() { w.collect(ctx) })
	for range writers {
		w.wg.Go(func() { w.write(ctx) })
	}
	return w
}

// Stop ends the writers and waits for them. A put still waiting then ends
// with its own context only: call Stop once nobody puts.
func (w *nextWriter) Stop() {
	w.cancel()
	w.wg.Wait()
}

// put stores e through the writers and returns the outcome of the write
// that carried it.
func (w *nextWriter) put(ctx context.Context, e store.DueEntry) error {
	r := putRequest{entry: e, done: make(chan error, 1)}
	select {
	case w.in <- r:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// collect gathers requests into batches: a batch is ready gather after its
// first request or when it holds maxPutBatch, and goes to the first writer
// free; until one is, it keeps taking requests (up to maxPutBatch).
func (w *nextWriter) collect(ctx context.Context) {
	var (
		batch []putRequest
		timer = time.NewTimer(time.Hour)
		ready bool
	)
	timer.Stop()
	defer timer.Stop()
	for {
		in, out := w.in, w.batches
		if len(batch) >= maxPutBatch {
			in, ready = nil, true
		}
		if !ready {
			out = nil
		}
		select {
		case r := <-in:
			batch = append(batch, r)
			if len(batch) == 1 {
				if w.gather <= 0 {
					ready = true
				} else {
					timer.Reset(w.gather)
				}
			}
		case <-timer.C:
			ready = true
		case out <- batch:
			timer.Stop()
			batch, ready = nil, false
		case <-ctx.Done():
			for _, r := range batch {
				r.done <- ctx.Err()
			}
			return
		}
	}
}

// write stores the batches the collector hands it.
func (w *nextWriter) write(ctx context.Context) {
	for {
		var batch []putRequest
		select {
		case batch = <-w.batches:
		case <-ctx.Done():
			return
		}
		entries := make([]store.DueEntry, len(batch))
		for i, r := range batch {
			entries[i] = r.entry
		}
		wctx, cancel := context.WithTimeout(ctx, w.timeout)
		err := w.store.PutDue(wctx, entries...)
		cancel()
		for _, r := range batch {
			r.done <- err
		}
	}
}
