package runner

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// finisher runs the finishing goroutines of records whose outcome is
// produced but not yet acknowledged (a delivery's events, a hand-over's
// copy), so that the worker or router that produced it takes its next
// record at once. A finishing goroutine finishes its record once Kafka
// acknowledges, or puts it back in its queue after a backoff (retryLater),
// and gives back the in-flight slot (Config.MaxInFlight) that its worker
// or router took.
type finisher struct {
	cfg *Config
	log *slog.Logger
	in  *backlog
	// slots are the runner's in-flight slots (Runner.slots), made anew by
	// each start of the Runner.
	slots chan struct{}
	wg    sync.WaitGroup
}

// finish waits in a finishing goroutine for durable, which reports whether
// rec's outcome is durable, then finishes rec or, when it is not, puts it
// back in its queue after a backoff. With freeFirst the in-flight slot
// comes back before the wait (a hand-over holds no lease; its record,
// unfinished until acknowledged, still counts against its partition's
// pending offsets), else once rec is finished or put back.
func (f *finisher) finish(ctx context.Context, rec *record, freeFirst bool, durable func() bool) {
	f.wg.Go(func() {
		if freeFirst {
			<-f.slots
		} else {
			defer func() { <-f.slots }()
		}
		if !durable() {
			f.retryLater(ctx, rec)
			return
		}
		f.in.finish(rec)
	})
}

// wait returns once every finishing goroutine has ended. Every finish is
// called by a worker or a router, so wait is called once they have exited.
func (f *finisher) wait() { f.wg.Wait() }

// retryLater puts rec back in its queue after a backoff: its outcome could
// not be made durable (an event or a hand-over was not acknowledged), and,
// as handleRecord does, the record is tried again while the runner owns its
// partition. It is dropped when the runner stops, is killed or loses the
// partition first: the next owner gets it again.
func (f *finisher) retryLater(ctx context.Context, rec *record) {
	if ctx.Err() != nil || !f.in.owns(rec) {
		return
	}
	rec.backoff = min(max(2*rec.backoff, f.cfg.HeldRetry), maxRecordRetry)
	f.log.Warn("run not finished; trying the record again", "topic", rec.tp.topic, "partition", rec.tp.partition,
		"offset", rec.rec.Offset, "retry_in", rec.backoff)
	time.AfterFunc(rec.backoff, func() {
		if ctx.Err() != nil {
			return
		}
		f.in.requeue(rec)
	})
}
