package registry

import (
	"context"
	"sync"

	"github.com/sundialhq/sundial/store"
)

// upserts turns the UpsertJob calls of concurrent handlers into
// store.UpsertJobs calls (a group commit): a handler queues its job and,
// while fewer than inFlight calls run, takes the queue (up to maxJobs) and
// runs it for everyone in it; otherwise it waits, and the queue grows for
// the next call. Under load one store call carries many definitions (one
// read for the lot, first occurrences batched per partition); alone, a
// handler runs its own job at once, with no timer in between.
type upserts struct {
	store   Store
	maxJobs int
	slots   chan struct{}

	mu    sync.Mutex
	queue []*upsertCall
}

type upsertCall struct {
	job    store.Job
	taken  bool // by a running call; guarded by upserts.mu
	result store.UpsertResult
	err    error
	done   chan struct{}
}

func newUpserts(st Store, inFlight, maxJobs int) *upserts {
	return &upserts{store: st, maxJobs: maxJobs, slots: make(chan struct{}, inFlight)}
}

// upsert stores job as store.UpsertJob does. An error is either the job's
// own (errors.Is store.ErrInvalid) or a transient failure of the call that
// carried it, to retry.
func (u *upserts) upsert(ctx context.Context, job store.Job) (store.Outcome, error) {
	c := &upsertCall{job: job, done: make(chan struct{})}
	u.mu.Lock()
	u.queue = append(u.queue, c)
	u.mu.Unlock()
	for {
		u.mu.Lock()
		queued := !c.taken
		u.mu.Unlock()
		if !queued {
			select {
			case <-c.done:
				return c.outcome()
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		select {
		case <-c.done:
			return c.outcome()
		case u.slots <- struct{}{}:
			if batch := u.take(); len(batch) > 0 {
				u.run(ctx, batch)
			}
			<-u.slots
		case <-ctx.Done():
			// The job may still be stored by a later call: harmless, the
			// record is redelivered and finds it UNCHANGED.
			return 0, ctx.Err()
		}
	}
}

func (c *upsertCall) outcome() (store.Outcome, error) {
	if c.err != nil {
		return 0, c.err
	}
	return c.result.Outcome, c.result.Err
}

// take removes up to maxJobs calls from the head of the queue.
func (u *upserts) take() []*upsertCall {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := min(len(u.queue), u.maxJobs)
	batch := u.queue[:n:n]
	u.queue = u.queue[n:]
	for _, c := range batch {
		c.taken = true
	}
	return batch
}

func (u *upserts) run(ctx context.Context, batch []*upsertCall) {
	jobs := make([]store.Job, len(batch))
	for i, c := range batch {
		jobs[i] = c.job
	}
	results, err := u.store.UpsertJobs(ctx, jobs)
	for i, c := range batch {
		if err != nil {
			c.err = err
		} else {
			c.result = results[i]
		}
		close(c.done)
	}
}
