package dispatcher

import (
	"context"
	"sync"
	"time"

	"github.com/sundialhq/sundial/store"
)

// nextWriters is how many PutDue calls of next occurrences one dispatcher
// has in flight at once. Each call carries whatever the firings of all its
// shards handed in while the others were in flight, so under load a call
// carries many entries, and a lone firing waits for nothing.
const nextWriters = 4

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
// hand it: a group commit across the dispatcher's shards. Each of its
// writers takes a request, then every request waiting behind it (up to
// maxPutBatch), and stores them in one PutDue call, which the store writes
// as few batches (store/cassandra lets one batch span the partitions of
// several shards when every node replicates every partition). A shard
// fires a few entries a second at most rates, so a writer per shard wrote
// one entry per call. It is started with the dispatcher and stopped after
// every owner has drained: a revoked shard's firings still finish.
type nextWriter struct {
	store   dueWriter
	timeout time.Duration
	in      chan putRequest
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// startNextWriter starts writers goroutines storing through st, each write
// bounded by timeout. They keep ctx's values, not its end: Stop ends them.
func startNextWriter(ctx context.Context, st dueWriter, timeout time.Duration, writers int) *nextWriter {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w := &nextWriter{store: st, timeout: timeout, in: make(chan putRequest), cancel: cancel}
	for range writers {
		w.wg.Go(func() { w.loop(ctx) })
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

func (w *nextWriter) loop(ctx context.Context) {
	for {
		var batch []putRequest
		select {
		case r := <-w.in:
			batch = append(batch, r)
		case <-ctx.Done():
			return
		}
	more:
		for len(batch) < maxPutBatch {
			select {
			case r := <-w.in:
				batch = append(batch, r)
			default:
				break more
			}
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
