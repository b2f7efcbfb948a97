package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sundialhq/sundial/apiserver"
	"github.com/sundialhq/sundial/checkpoint"
	"github.com/sundialhq/sundial/internal/backoff"
	sdconnect "github.com/sundialhq/sundial/internal/connect"
	"github.com/sundialhq/sundial/internal/lifecycle"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/target"
)

// httpClient is the client of the API calls: Config.HTTPClient, or one
// whose TLS is Config.TLS with the files and server name of Config's
// TLSCAFile, TLSCertFile, TLSKeyFile and TLSServerName (package connect's
// rule, the CLI's), each error naming its setting.
func (c Config) httpClient() (*http.Client, error) {
	if c.HTTPClient != nil {
		return c.HTTPClient, nil
	}
	tc := c.TLS
	files := sdconnect.TLS{CAFile: c.TLSCAFile, CertFile: c.TLSCertFile, KeyFile: c.TLSKeyFile, ServerName: c.TLSServerName}
	if files.On() {
		ft, err := files.Config("api")
		if err != nil {
			return nil, fmt.Errorf("worker config: %w", err)
		}
		if tc == nil {
			tc = ft
		} else {
			tc = tc.Clone()
			if ft.RootCAs != nil {
				tc.RootCAs = ft.RootCAs
			}
			if len(ft.Certificates) > 0 {
				tc.Certificates = ft.Certificates
			}
			if ft.ServerName != "" {
				tc.ServerName = ft.ServerName
			}
		}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	tr.MaxIdleConnsPerHost = max(c.Concurrency, 2)
	return &http.Client{Transport: tr}, nil
}

// remote is a worker that talks to the API's worker gateway only.
type remote struct {
	w        *Worker
	api      apiv1connect.WorkerServiceClient
	handlers map[string]handler
	names    []string
	// slots holds one token per task executing or asked for: Concurrency
	// of them bound the tasks the worker holds.
	slots chan struct{}
	// carry: the gateway said, in its last Poll answer, that it takes the
	// outcomes a Poll carries.
	carry atomic.Bool
	// done holds the outcomes waiting for a Poll to carry them (carried);
	// kick wakes the flusher when one is added.
	done carried
	kick chan struct{}
	// live sends the running attempts' lines to their live tails.
	live *liveLog
}

// completeLinger is how long an outcome waits for a Poll to carry it
// before it is sent in a Complete of its own. A busy worker's pollers
// carry it sooner (a handler that returns frees its slot, which wakes a
// poller); an idle worker's Polls wait for tasks, and its outcomes go
// alone after this.
const completeLinger = 25 * time.Millisecond

// pending is an outcome waiting for a Poll.
type pending struct {
	req *apiv1.CompleteRequest
	run string // the run id, for the logs
	at  time.Time
	// again: a Poll that carried it failed; the gateway may have taken
	// it already, and then refuses it as an ended task's.
	again bool
}

// carried is the outcomes waiting for a Poll to carry them. Once closed
// (the worker stopping), it takes none: they are sent on their own.
type carried struct {
	mu     sync.Mutex
	list   []pending
	closed bool
}

// add keeps p for a Poll; false once closed.
func (c *carried) add(p pending) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.list = append(c.list, p)
	return true
}

// take removes and returns the outcomes added at or before upTo (all of
// them for the zero time), oldest first.
func (c *carried) take(upTo time.Time) []pending {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := len(c.list)
	if !upTo.IsZero() {
		i = 0
		for i < len(c.list) && !c.list[i].at.After(upTo) {
			i++
		}
	}
	got := slices.Clone(c.list[:i])
	c.list = slices.Delete(c.list, 0, i)
	return got
}

// oldest is when the oldest outcome kept was added; zero when none is.
func (c *carried) oldest() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.list) == 0 {
		return time.Time{}
	}
	return c.list[0].at
}

// close takes every outcome left and adds none afterwards.
func (c *carried) close() []pending {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	got := c.list
	c.list = nil
	return got
}

// maxPollers bounds the Polls a worker keeps in flight. A Poll asks for
// as many tasks as the worker has free slots (up to maxPollTasks), so a
// few pollers keep every slot busy: while one Poll travels, another holds
// the slots freed meanwhile. One Poll per task, as the worker did first,
// cost a round trip per task on top of the Complete, and ran the SDK path
// at a fraction of the stock runner's rate (docs/architecture.md §11).
const maxPollers = 4

// maxPollTasks is the most tasks one Poll asks for (the gateway's bound).
const maxPollTasks = 64

// startRemote starts the pollers (maxPollers at most, Concurrency at
// most), which execute each task they receive in a goroutine of its own
// holding one of Concurrency slots.
func (w *Worker) startRemote(run *lifecycle.Run) error {
	c := w.cfg
	hc, err := c.httpClient()
	if err != nil {
		return err
	}
	w.mu.Lock()
	rm := &remote{w: w, handlers: map[string]handler{}, slots: make(chan struct{}, c.Concurrency), kick: make(chan struct{}, 1)}
	for name, h := range w.handlers {
		rm.handlers[name] = h.(handler)
		rm.names = append(rm.names, name)
	}
	w.mu.Unlock()
	if len(rm.names) == 0 {
		return errors.New("worker: no handler registered (Handle before Start)")
	}
	slices.Sort(rm.names)
	rm.api = apiv1connect.NewWorkerServiceClient(hc, c.APIURL, connect.WithInterceptors(apiserver.BearerToken(c.Token)))
	rm.live = newLiveLog(rm.api, c.ID, c.Logger)
	run.Go(rm.flushLoop)
	run.Go(rm.live.loop)
	for range min(c.Concurrency, maxPollers) {
		run.Go(rm.pollLoop)
	}
	c.Logger.Info("worker polling the API's gateway", "api", c.APIURL, "pool", cmp.Or(c.Pool, DefaultPool), "handlers", rm.names, "worker_id", c.ID)
	return nil
}

// reserve takes one free slot, waiting for it, then every other free slot
// up to maxPollTasks without waiting. It returns how many it took, 0 when
// ctx ended first.
func (rm *remote) reserve(ctx context.Context) int {
	select {
	case rm.slots <- struct{}{}:
	case <-ctx.Done():
		return 0
	}
	n := 1
	for n < maxPollTasks {
		select {
		case rm.slots <- struct{}{}:
			n++
		default:
			return n
		}
	}
	return n
}

// release gives n slots back.
func (rm *remote) release(n int) {
	for range n {
		<-rm.slots
	}
}

// pollLoop reserves the free slots, polls for as many tasks, and executes
// each in a goroutine of its own that gives its slot back once the handler
// has returned (its Complete goes on without it: Concurrency bounds the
// handlers, and a slot kept for a Complete's round trip idled), until ctx
// ends (Stop); it returns once its tasks are completed.
func (rm *remote) pollLoop(ctx context.Context) {
	c := rm.w.cfg
	var tasks sync.WaitGroup
	defer tasks.Wait()
	retry := backoff.New(200*time.Millisecond, 5*time.Second)
	for ctx.Err() == nil {
		n := rm.reserve(ctx)
		if n == 0 {
			return
		}
		// The outcomes waiting go with this Poll: the gateway takes them
		// before it waits for tasks.
		var out []pending
		if rm.carry.Load() {
			out = rm.done.take(time.Time{})
		}
		req := &apiv1.PollRequest{
			WorkerId: c.ID, Version: c.Version, Handlers: rm.names, MaxTasks: uint32(n), Wait: durationpb.New(20 * time.Second), Pool: c.Pool, //nolint:gosec // n <= maxPollTasks
		}
		for _, p := range out {
			req.Completions = append(req.Completions, p.req)
		}
		res, err := rm.api.Poll(ctx, connect.NewRequest(req))
		if err != nil {
			// The gateway may have taken them or not: they are given
			// again, and one it took already is dropped there as an
			// ended task's.
			for _, p := range out {
				p.again = true
				rm.finish(ctx, p)
			}
			rm.release(n)
			if ctx.Err() == nil {
				c.Logger.Warn("poll failed", "err", err, "retry_within", retry.Peek())
				retry.Wait(ctx)
			}
			continue
		}
		retry.Reset()
		rm.carry.Store(res.Msg.GetTakesCompletions())
		rm.live.configure(res.Msg.GetLogTail())
		got := res.Msg.GetTasks()
		// A gateway gives max_tasks at most; one that gave more would
		// have its extra tasks lost as worker_lost, never run twice.
		got = got[:min(len(got), n)]
		rm.release(n - len(got))
		interval := res.Msg.GetHeartbeatInterval().AsDuration()
		for _, t := range got {
			tasks.Go(func() {
				var once sync.Once
				free := func() { once.Do(func() { rm.release(1) }) }
				defer free()
				rm.execute(ctx, t, interval, free)
			})
		}
	}
}

// errStopped is the cause of a handler's ctx when the gateway says the
// attempt must stop.
var errStopped = errors.New("worker: the gateway stopped this attempt")

// execute runs one task's handler, heartbeating it, calls free once the
// handler has returned, and completes the task.
func (rm *remote) execute(ctx context.Context, t *apiv1.WorkerTask, interval time.Duration, free func()) {
	c := rm.w.cfg
	h, ok := rm.handlers[t.GetHandler()]
	if !ok { // the gateway gives only the handlers polled for
		rm.finish(ctx, pending{run: t.GetRunId(), req: &apiv1.CompleteRequest{TaskToken: t.GetTaskToken(), Outcome: apiv1.CompleteRequest_OUTCOME_FAILURE,
			ErrorCode: target.CodeUnknownHandler, ErrorMessage: "no handler named " + t.GetHandler()}})
		return
	}
	// Stop lets the attempt finish and complete (a drain): the gateway
	// bounds it by the job's timeout, and the beater stops it when the
	// gateway says so.
	ctx = context.WithoutCancel(ctx)
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if d := t.GetDeadline(); d != nil {
		var stop context.CancelFunc
		runCtx, stop = context.WithDeadline(runCtx, d.AsTime())
		defer stop()
	}
	beats := &beater{api: rm.api, token: t.GetTaskToken(), cancel: cancel, interval: max(interval, 100*time.Millisecond), last: t.GetCheckpoint(), has: t.GetHasCheckpoint()}
	runCtx = context.WithValue(runCtx, remoteKey{}, beats)
	var beatWG sync.WaitGroup
	beatCtx, stopBeats := context.WithCancel(ctx)
	beatWG.Go(func() { beats.loop(beatCtx) })
	out := &target.Output{}
	// The handler's lines go to the run's live tail as it runs, when the
	// gateway takes them.
	live := rm.live.open(t.GetTaskToken())
	if live != nil {
		out.Tail = live
	}
	run := &sundialv1.Run{RunId: t.GetRunId(), JobId: t.GetJobId(), Attempt: t.GetAttempt(), DueTime: t.GetDueTime(), Payload: t.GetPayload(),
		BaseRunId: t.GetBaseRunId(), ShardIndex: t.GetShardIndex(), ShardCount: t.GetShardCount(),
		Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: t.GetHandler()}}}}
	r := newRun(target.Request{Run: run, FencingToken: t.GetFencingToken(), Output: out}, c.Logger)
	r.Replay = t.GetReplay()
	err := callRemote(runCtx, h.fn, r)
	stopBeats()
	beatWG.Wait()
	free()
	rest := rm.live.finish(live)
	if errors.Is(context.Cause(runCtx), errStopped) {
		// The gateway decided the attempt's outcome (lost lease, cancel,
		// timeout) or cannot be reached: the task is no longer this
		// worker's to complete.
		c.Logger.Info("attempt stopped", "run_id", t.GetRunId(), "reason", beats.reason())
		return
	}
	req := &apiv1.CompleteRequest{TaskToken: t.GetTaskToken(), Outcome: apiv1.CompleteRequest_OUTCOME_SUCCESS, LogLines: out.Lines(), LiveLog: rest}
	switch {
	case err == nil:
	case errors.Is(err, ErrSuspended) && beats.suspended():
		req.Outcome = apiv1.CompleteRequest_OUTCOME_SUSPEND
	default:
		te := target.Classify(err, target.CodeHandler)
		req.Outcome, req.ErrorCode, req.ErrorMessage, req.Retryable = apiv1.CompleteRequest_OUTCOME_FAILURE, te.Code, te.Message, te.Retryable
	}
	rm.finish(ctx, pending{run: t.GetRunId(), req: req})
}

// finish gives an attempt's outcome: kept for the next Poll to carry when
// the gateway takes outcomes on Polls (the flusher sends it alone if no
// Poll has carried it within completeLinger), else, and once the worker
// stops, in a Complete of its own.
func (rm *remote) finish(ctx context.Context, p pending) {
	p.at = time.Now()
	if rm.carry.Load() && rm.done.add(p) {
		select {
		case rm.kick <- struct{}{}:
		default:
		}
		return
	}
	rm.complete(ctx, p)
}

// flushLoop sends, each in a Complete of its own, the outcomes no Poll
// carried within completeLinger, until ctx ends (Stop); then it sends
// those left and closes the list, so that later outcomes are sent at once.
func (rm *remote) flushLoop(ctx context.Context) {
	var sends sync.WaitGroup
	defer sends.Wait()
	send := func(ps []pending) {
		for _, p := range ps {
			sends.Go(func() { rm.complete(ctx, p) })
		}
	}
	for {
		select {
		case <-ctx.Done():
			send(rm.done.close())
			return
		case <-rm.kick:
		}
		// Wait until the oldest outcome has lingered, send those that
		// have, and go on while any is left.
		for {
			next := rm.done.oldest()
			if next.IsZero() {
				break
			}
			if !backoff.Sleep(ctx, time.Until(next.Add(completeLinger))) {
				break
			}
			send(rm.done.take(time.Now().Add(-completeLinger)))
		}
	}
}

// callRemote calls fn, turning a panic into a failure not retried.
func callRemote(ctx context.Context, fn Handler, r *Run) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &target.Error{Code: target.CodeHandlerPanic, Message: fmt.Sprint(p)}
		}
	}()
	return fn(ctx, r)
}

// complete gives the outcome in a Complete of its own, trying again while
// the gateway is unreachable, up to the time a lost worker is declared:
// past it the attempt is redone elsewhere anyway.
func (rm *remote) complete(ctx context.Context, p pending) {
	req := p.req
	retry := backoff.New(100*time.Millisecond, 2*time.Second)
	for i := 0; i < 10; i++ {
		_, err := rm.api.Complete(context.WithoutCancel(ctx), connect.NewRequest(req))
		if err == nil || connect.CodeOf(err) == connect.CodeNotFound || connect.CodeOf(err) == connect.CodeInvalidArgument {
			switch {
			case err != nil && p.again && connect.CodeOf(err) == connect.CodeNotFound:
				rm.w.cfg.Logger.Debug("outcome already taken with the poll that carried it", "run_id", p.run)
			case err != nil:
				rm.w.cfg.Logger.Warn("outcome refused; the gateway no longer holds the task", "run_id", p.run, "err", err)
			}
			return
		}
		rm.w.cfg.Logger.Warn("outcome not delivered; trying again", "run_id", p.run, "err", err)
		retry.Wait(context.WithoutCancel(ctx))
	}
}

// remoteKey carries an attempt's beater in its handler's ctx, for
// Checkpoint and LastCheckpoint.
type remoteKey struct{}

// beater heartbeats one task and saves its checkpoints through the
// gateway.
type beater struct {
	api      apiv1connect.WorkerServiceClient
	token    string
	cancel   context.CancelCauseFunc
	interval time.Duration

	mu     sync.Mutex
	last   []byte
	has    bool
	susp   bool
	stopBy string
	ok     time.Time
}

func (b *beater) reason() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stopBy
}

func (b *beater) suspended() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.susp
}

// loop heartbeats every interval until ctx ends; an answer that says stop,
// or no answer for three intervals (the gateway then counts this worker as
// lost), cancels the handler.
func (b *beater) loop(ctx context.Context) {
	tick := time.NewTicker(b.interval)
	defer tick.Stop()
	b.ok = time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		res, err := b.beat(ctx, nil, false)
		switch {
		case err == nil && res.GetStop():
			b.stop(res.GetReason())
			return
		case err != nil && connect.CodeOf(err) == connect.CodeNotFound:
			b.stop("task unknown to the gateway")
			return
		case err != nil && time.Since(b.ok) >= 3*b.interval:
			b.stop("gateway unreachable: " + err.Error())
			return
		}
	}
}

func (b *beater) stop(reason string) {
	b.mu.Lock()
	b.stopBy = reason
	b.mu.Unlock()
	b.cancel(errStopped)
}

func (b *beater) beat(ctx context.Context, data []byte, has bool) (*apiv1.HeartbeatResponse, error) {
	res, err := b.api.Heartbeat(ctx, connect.NewRequest(&apiv1.HeartbeatRequest{TaskToken: b.token, Checkpoint: data, HasCheckpoint: has}))
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.ok = time.Now()
	b.mu.Unlock()
	return res.Msg, nil
}

// save stores data as the run's checkpoint through the gateway.
func (b *beater) save(ctx context.Context, data []byte) error {
	if len(data) > MaxCheckpointSize {
		return &checkpoint.TooLargeError{Size: len(data)}
	}
	res, err := b.beat(ctx, data, true)
	if err != nil {
		return fmt.Errorf("worker: checkpoint: %w", err)
	}
	switch {
	case res.GetStop():
		return fmt.Errorf("worker: checkpoint: %w (%s)", checkpoint.ErrStale, res.GetReason())
	case res.GetCheckpointError() != "":
		return fmt.Errorf("worker: checkpoint: %s", res.GetCheckpointError())
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.last, b.has = data, true
	if res.GetSuspended() {
		b.susp = true
		return ErrSuspended
	}
	return nil
}

func (b *beater) lastCheckpoint() ([]byte, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last, b.has
}
