package registry

import (
	"context"
	"errors"
	"sync"

	"github.com/sundialhq/sundial/audit"
	"github.com/sundialhq/sundial/store"
)

// group turns the calls of concurrent handlers into calls of run on many
// inputs at once (a group commit): a handler queues its input and, while
// fewer than inFlight calls run, takes the queue (up to max inputs) and
// runs it for everyone in it; otherwise it waits, and the queue grows for
// the next call. Under load one store call carries many definitions; alone,
// a handler runs its own input at once, with no timer in between.
type group[In, Out any] struct {
	run   func(ctx context.Context, in []In) ([]Out, error)
	max   int
	slots chan struct{}

	mu    sync.Mutex
	queue []*groupCall[In, Out]
}

type groupCall[In, Out any] struct {
	in    In
	taken bool // by a running call; guarded by group.mu
	out   Out
	err   error
	done  chan struct{}
}

// newGroup returns a group whose calls of run (at most inFlight at once)
// carry up to max inputs. run returns one output per input, in order, or
// an error for all of them.
func newGroup[In, Out any](inFlight, max int, run func(context.Context, []In) ([]Out, error)) *group[In, Out] {
	return &group[In, Out]{run: run, max: max, slots: make(chan struct{}, inFlight)}
}

// do returns in's output, or the error of the call that carried it (a
// transient failure, to retry), or ctx's.
func (g *group[In, Out]) do(ctx context.Context, in In) (Out, error) {
	c := &groupCall[In, Out]{in: in, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, c)
	g.mu.Unlock()
	var zero Out
	for {
		g.mu.Lock()
		queued := !c.taken
		g.mu.Unlock()
		if !queued {
			select {
			case <-c.done:
				return c.out, c.err
			case <-ctx.Done():
				return zero, ctx.Err()
			}
		}
		select {
		case <-c.done:
			return c.out, c.err
		case g.slots <- struct{}{}:
			if batch := g.take(); len(batch) > 0 {
				g.call(ctx, batch)
			}
			<-g.slots
		case <-ctx.Done():
			// The input may still be run by a later call: harmless for
			// the registry's calls, which are idempotent.
			return zero, ctx.Err()
		}
	}
}

// take removes up to max calls from the head of the queue.
func (g *group[In, Out]) take() []*groupCall[In, Out] {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := min(len(g.queue), g.max)
	batch := g.queue[:n:n]
	g.queue = g.queue[n:]
	for _, c := range batch {
		c.taken = true
	}
	return batch
}

func (g *group[In, Out]) call(ctx context.Context, batch []*groupCall[In, Out]) {
	in := make([]In, len(batch))
	for i, c := range batch {
		in[i] = c.in
	}
	out, err := g.run(ctx, in)
	if err == nil && len(out) != len(in) {
		err = errors.New("registry: a grouped store call answered a different number of results")
	}
	for i, c := range batch {
		if err != nil {
			c.err = err
		} else {
			c.out = out[i]
		}
		close(c.done)
	}
}

// upserts groups store.UpsertJobs calls: under load one call reads the
// rows of many definitions at once and batches their first occurrences per
// partition.
type upserts = group[store.Job, store.UpsertResult]

func newUpserts(st Store, inFlight, maxJobs int) *upserts {
	return newGroup(inFlight, maxJobs, st.UpsertJobs)
}

// upsert stores job as store.UpsertJob does. An error is either the job's
// own (errors.Is store.ErrInvalid) or a transient failure of the call that
// carried it, to retry. A call cut short by ctx may still store the job
// later: harmless, the record is redelivered and finds it UNCHANGED.
func upsert(ctx context.Context, u *upserts, job store.Job) (store.Outcome, error) {
	res, err := u.do(ctx, job)
	if err != nil {
		return 0, err
	}
	return res.Outcome, res.Err
}

// stored is what the store holds for a job id: found is false when it has
// no row, not even a tombstone.
type stored struct {
	job   store.Job
	found bool
}

// lookups groups the reads of the jobs in force (store.GetJobs): one read
// per definition would be a request of its own, costing the node about as
// much as the rest of the definition's registration.
type lookups = group[string, stored]

func newLookups(st Store, inFlight, maxIDs int) *lookups {
	return newGroup(inFlight, maxIDs, func(ctx context.Context, ids []string) ([]stored, error) {
		jobs, err := st.GetJobs(ctx, ids)
		if err != nil {
			return nil, err
		}
		out := make([]stored, len(ids))
		for i, id := range ids {
			out[i].job, out[i].found = jobs[id]
		}
		return out, nil
	})
}

// audits groups the audit records of the definitions handled at once into
// one Auditor.KeepAll call: kept one by one, each was one or two requests
// of its own.
type audits = group[audit.Record, struct{}]

func newAudits(a Auditor, inFlight, maxRecords int) *audits {
	return newGroup(inFlight, maxRecords, func(ctx context.Context, recs []audit.Record) ([]struct{}, error) {
		if err := a.KeepAll(ctx, recs); err != nil {
			return nil, err
		}
		return make([]struct{}, len(recs)), nil
	})
}
