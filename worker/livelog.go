package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/sundialhq/sundial/internal/backoff"
	"github.com/sundialhq/sundial/logtail"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
)

// The bounds of one AppendLog the worker sends: the gateway refuses more
// than maxAppendTasks entries (AppendLogRequest.tasks), and maxAppendBytes
// of lines stays well under the API's request bound (4 MiB by default).
// A worker with more to send makes several calls.
const (
	maxAppendTasks = 1024
	maxAppendBytes = 1 << 20
)

// minLogEvery bounds how often the worker sends lines, whatever the
// gateway says.
const minLogEvery = 100 * time.Millisecond

// liveLog sends the lines of a team's worker's running attempts to the
// gateway (WorkerService.AppendLog) for their live tails: once per
// LogTail.every, one call for all the attempts with new lines, each
// attempt's lines bounded by the bounds the gateway told (logtail.Pending,
// the rule the gateway's runner applies again). It sends nothing until a
// Poll answer says the gateway takes AppendLog (PollResponse.log_tail),
// and nothing for an attempt that logs nothing. A failed call loses those
// lines for the tail only: each attempt's final log goes with its outcome.
type liveLog struct {
	api      apiv1connect.WorkerServiceClient
	workerID string
	logger   *slog.Logger

	mu sync.Mutex
	// bounds are the gateway's; Every is zero while it has not said it
	// takes AppendLog.
	bounds logtail.Bounds
	tasks  map[*liveTask]struct{}
	// ready is closed when a gateway first says it takes AppendLog.
	ready     chan struct{}
	readyOnce sync.Once
}

func newLiveLog(api apiv1connect.WorkerServiceClient, workerID string, logger *slog.Logger) *liveLog {
	return &liveLog{api: api, workerID: workerID, logger: logger, tasks: map[*liveTask]struct{}{}, ready: make(chan struct{})}
}

// configure takes the bounds a Poll answer told; nil (a gateway without
// AppendLog) turns the live tail off for the attempts opened afterwards.
func (l *liveLog) configure(lt *apiv1.LogTail) {
	b := tailBounds(lt)
	l.mu.Lock()
	l.bounds = b
	l.mu.Unlock()
	if lt != nil {
		l.readyOnce.Do(func() { close(l.ready) })
	}
}

// tailBounds is how the worker bounds each attempt's lines, from what a
// Poll answer told: the gateway's bounds (a zero field is logtail's
// default), with a send no more often than minLogEvery and one attempt's
// chunk no bigger than one call carries (maxAppendBytes: the API refuses
// a bigger request), whatever the gateway says. Nil (a gateway that takes
// no AppendLog) is the zero Bounds: nothing is sent.
func tailBounds(lt *apiv1.LogTail) logtail.Bounds {
	if lt == nil {
		return logtail.Bounds{}
	}
	b := logtail.Bounds{Every: max(lt.GetEvery().AsDuration(), 0),
		ChunkBytes: int(lt.GetChunkBytes()), AttemptBytes: int(lt.GetAttemptBytes())}.WithDefaults()
	b.Every = max(b.Every, minLogEvery)
	b.ChunkBytes = min(b.ChunkBytes, maxAppendBytes)
	return b
}

// open returns the live tail of one task's attempt, the LineSink of its
// target.Output; nil when the gateway takes no AppendLog.
func (l *liveLog) open(token string) *liveTask {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.bounds.Every == 0 {
		return nil
	}
	t := &liveTask{token: token, pending: logtail.NewPending(l.bounds)}
	l.tasks[t] = struct{}{}
	return t
}

// finish ends t once its handler has returned, and returns what its
// outcome carries for the tail (CompleteRequest.live_log): the lines not
// sent yet, when some lines of it were sent before (the gateway then
// keeps log_lines for history only); nil when none were, and then
// log_lines go to the tail as the attempt ends. It waits for a call
// carrying t's lines to return, so that the outcome's lines follow them.
func (l *liveLog) finish(t *liveTask) *apiv1.LiveLog {
	if t == nil {
		return nil
	}
	l.mu.Lock()
	delete(l.tasks, t)
	l.mu.Unlock()
	t.mu.Lock()
	t.ended = true
	flight := t.flight
	t.mu.Unlock()
	if flight != nil {
		<-flight
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.sent {
		return nil
	}
	lines, dropped := t.pending.Take()
	return &apiv1.LiveLog{Lines: lines, Dropped: uint64(dropped)} //nolint:gosec // a count of lines is never negative
}

// every is how long the loop waits between sends: the gateway's interval,
// or logtail's default once a gateway has said it takes none.
func (l *liveLog) every() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.bounds.Every == 0 {
		return logtail.DefaultEvery
	}
	return l.bounds.Every
}

// loop sends the attempts' new lines every interval, from the first Poll
// answer that says the gateway takes them until ctx ends (the worker
// stopping); the attempts still running then send theirs with their
// outcomes.
func (l *liveLog) loop(ctx context.Context) {
	select {
	case <-l.ready:
	case <-ctx.Done():
		return
	}
	for backoff.Sleep(ctx, l.every()) {
		l.flush(ctx)
	}
}

// flush sends every attempt's new lines, in as few calls as the bounds of
// one call allow.
func (l *liveLog) flush(ctx context.Context) {
	l.mu.Lock()
	var batch []*liveTask
	var entries []*apiv1.TaskLog
	for t := range l.tasks {
		if e, ok := t.take(); ok {
			batch = append(batch, t)
			entries = append(entries, e)
		}
	}
	l.mu.Unlock()
	for len(batch) > 0 {
		n, size := 0, 0
		for n < len(batch) && n < maxAppendTasks && (n == 0 || size+logBytes(entries[n]) <= maxAppendBytes) {
			size += logBytes(entries[n])
			n++
		}
		l.send(ctx, batch[:n], entries[:n])
		batch, entries = batch[n:], entries[n:]
	}
}

// send makes one AppendLog of entries, the lines of batch, and lets
// their finishes go on once it returns.
func (l *liveLog) send(ctx context.Context, batch []*liveTask, entries []*apiv1.TaskLog) {
	defer func() {
		for _, t := range batch {
			t.landed()
		}
	}()
	callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := l.api.AppendLog(callCtx, connect.NewRequest(&apiv1.AppendLogRequest{WorkerId: l.workerID, Tasks: entries}))
	if err != nil {
		if ctx.Err() == nil {
			l.logger.Warn("live log lines not delivered; the runs' tails miss them (their final logs keep them)", "attempts", len(entries), "err", err)
		}
		return
	}
	for _, i := range res.Msg.GetRefused() {
		if int(i) < len(batch) {
			batch[i].refuse()
		}
	}
}

// logBytes is about what an entry's lines weigh on the wire.
func logBytes(e *apiv1.TaskLog) int {
	n := len(e.GetTaskToken()) + 16
	for _, line := range e.GetLog().GetLines() {
		n += len(line) + 4
	}
	return n
}

// liveTask is one attempt's lines on their way to its live tail: the
// LineSink of the attempt's target.Output, which hands it every line cut
// as the attempt's log keeps it.
type liveTask struct {
	token string

	mu      sync.Mutex
	pending logtail.Pending
	sent    bool          // lines were taken for an AppendLog
	ended   bool          // the handler returned, or the gateway refused the task
	flight  chan struct{} // closed when the AppendLog carrying its lines returns
}

// Line keeps one line for the next send, within the bounds.
func (t *liveTask) Line(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.ended {
		t.pending.Add(line)
	}
}

// Skipped counts n lines left out before they reached t.
func (t *liveTask) Skipped(n int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending.Skip(n)
}

// take returns t's entry for the next call, and marks it in flight; false
// when t has nothing new or has ended.
func (t *liveTask) take() (*apiv1.TaskLog, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended || t.pending.Empty() {
		return nil, false
	}
	lines, dropped := t.pending.Take()
	t.sent = true
	t.flight = make(chan struct{})
	return &apiv1.TaskLog{TaskToken: t.token, Log: &apiv1.LiveLog{Lines: lines, Dropped: uint64(dropped)}}, true //nolint:gosec // a count of lines is never negative
}

// landed says the call carrying t's lines returned.
func (t *liveTask) landed() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.flight != nil {
		close(t.flight)
		t.flight = nil
	}
}

// refuse says the gateway took no lines of t: its task is no longer this
// worker's. No more are sent.
func (t *liveTask) refuse() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ended = true
}
