package runner

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/lateness"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/target"
)

// runEvents produces the events of one delivery of a run to the events
// topic, in order of their times, and tells once they are all acknowledged
// (flush). Its events carry the fencing token of the delivery's lease and,
// when the attempt ended, what the attempt logged.
type runEvents struct {
	r   *Runner
	run *sundialv1.Run
	log func() *slog.Logger
	// token is the fencing token of the delivery's lease, 0 before one is
	// taken.
	token int64
	// lastEvent is the time of the last event: each event's time is after
	// it, at microsecond precision, so history orders the states of the
	// attempt as they happened (see event).
	lastEvent time.Time
	// out collects what the attempt logs, for its final event.
	out *target.Output
	// received, leased and started are the delivery's timeline (zero
	// until reached), and wait the reason of its longest wait beyond
	// Config.WaitBound (waits.go).
	received, leased, started time.Time
	wait                      lateness.Reason
	// traceID is the trace id of the delivery's span, "" with none.
	traceID string

	// held is the delivery's STARTED event while it is held back
	// (Config.StartedDelay, emitStarted), nil otherwise; heldTimer
	// produces it when the delay passes. heldMu orders it before any
	// later event of the delivery.
	heldMu    sync.Mutex
	held      *sundialv1.RunEvent
	heldTimer *time.Timer

	pending sync.WaitGroup
	errMu   sync.Mutex
	prodErr error
}

// event returns a RunEvent of the run in state, changed by mod. Its time is
// now, at microsecond precision, and after the execution's previous event:
// history keeps an attempt's newest state by event time, and a failure
// within a microsecond of its start must not tie with it.
func (e *runEvents) event(state sundialv1.RunState, mod func(*sundialv1.RunEvent)) *sundialv1.RunEvent {
	run := e.run
	at := e.r.cfg.Now().Truncate(time.Microsecond)
	if !at.After(e.lastEvent) {
		at = e.lastEvent.Add(time.Microsecond)
	}
	e.lastEvent = at
	ev := &sundialv1.RunEvent{
		RunId: run.GetRunId(), JobId: run.GetJobId(), Attempt: run.GetAttempt(), State: state,
		Time: timestamppb.New(at), DueTime: run.GetDueTime(), AttemptDueTime: timestamppb.New(attemptDue(run)),
		RunnerId: e.r.cfg.ID, DagRunId: run.GetDagRunId(), DagNodeId: run.GetDagNodeId(),
		Priority: run.GetPriority(), OwnerTeam: run.GetOwnerTeam(), FencingToken: e.token,
		TraceId: e.traceID,
	}
	if run.GetBaseRunId() != "" {
		// A child run is part of its base run, whose events alone speak
		// for the DAG node (baseEvent).
		ev.DagRunId, ev.DagNodeId = "", ""
	}
	switch state {
	case sundialv1.RunState_RUN_STATE_SUCCEEDED, sundialv1.RunState_RUN_STATE_FAILED, sundialv1.RunState_RUN_STATE_TIMED_OUT,
		sundialv1.RunState_RUN_STATE_DEAD, sundialv1.RunState_RUN_STATE_CANCELLED:
		ev.Log = e.out.Lines()
	}
	e.times(ev)
	if mod != nil {
		mod(ev)
	}
	switch state {
	case sundialv1.RunState_RUN_STATE_DEFERRED, sundialv1.RunState_RUN_STATE_SKIPPED:
		// A deferral's own reason is its wait.
		if w := lateness.OfDeferral(ev.GetReason()); w != lateness.None {
			ev.WaitReason = string(w)
		}
	}
	return ev
}

// emitStarted emits ev, the delivery's STARTED event, or holds it back for
// Config.StartedDelay: an attempt that ends within the delay produces
// its outcome alone, which carries the start (started_time, duration), so
// a short run costs one record fewer. A STARTED held that long is
// produced then, with the time it was made; one still held when the
// delivery ends without another event (unfinished) is produced then
// (releaseStarted).
func (e *runEvents) emitStarted(ev *sundialv1.RunEvent) {
	d := e.r.cfg.StartedDelay
	if d < 0 {
		e.emit(ev)
		return
	}
	e.heldMu.Lock()
	defer e.heldMu.Unlock()
	e.held = ev
	e.heldTimer = time.AfterFunc(d, func() { e.releaseStarted(false) })
}

// releaseStarted ends the hold of the STARTED event, if one is held:
// elided, it is dropped (the event that ends the hold carries the start);
// otherwise it is produced now.
func (e *runEvents) releaseStarted(elided bool) {
	e.heldMu.Lock()
	defer e.heldMu.Unlock()
	ev := e.held
	if ev == nil {
		return
	}
	e.held = nil
	e.heldTimer.Stop()
	if elided {
		return
	}
	e.emit(ev) // under heldMu: before any later event of the delivery
}

// emit produces ev to the events topic without waiting; flush waits. An
// event other than STARTED ends the hold of the delivery's STARTED first:
// it carries the start itself (times), so the STARTED held is dropped.
func (e *runEvents) emit(ev *sundialv1.RunEvent) {
	if ev.GetState() != sundialv1.RunState_RUN_STATE_STARTED {
		e.releaseStarted(ev.GetStartedTime() != nil)
	}
	if e.r.isKilled() {
		return
	}
	val, headers, err := topics.EncodeEvent(e.r.cfg.EventEncoding, ev)
	if err != nil {
		e.setErr(err)
		return
	}
	e.pending.Add(1)
	e.r.producer.Produce(context.Background(), &kgo.Record{
		Topic: e.r.cfg.Topics.Events(), Key: []byte(ev.GetJobId()), Value: val,
		Headers: headers,
	}, func(_ *kgo.Record, err error) {
		if err != nil {
			e.setErr(err)
		}
		e.pending.Done()
	})
}

func (e *runEvents) setErr(err error) {
	e.errMu.Lock()
	defer e.errMu.Unlock()
	if e.prodErr == nil {
		e.prodErr = err
	}
}

// flush waits for every emitted event's acknowledgement and reports whether
// all were written.
func (e *runEvents) flush(context.Context) bool {
	e.pending.Wait()
	e.errMu.Lock()
	defer e.errMu.Unlock()
	if e.r.isKilled() {
		return false
	}
	if e.prodErr != nil {
		e.log().Error("event not written; the run will be delivered again", "err", e.prodErr)
		return false
	}
	return true
}

// baseEvent turns ev, an event of a child run, into the same event of its
// base run, which is the one a DAG node's run id names. A base run is
// never attempted itself (only its children are, and retried), so its
// events are of attempt 1, whatever the child's attempt.
func (e *runEvents) baseEvent(ev *sundialv1.RunEvent) *sundialv1.RunEvent {
	b := proto.Clone(ev).(*sundialv1.RunEvent)
	b.RunId = e.run.GetBaseRunId()
	b.Attempt = 1
	b.DagRunId = e.run.GetDagRunId()
	b.DagNodeId = e.run.GetDagNodeId()
	return b
}

// emitEnd emits ev, an event that ends the run without success (DEAD,
// SKIPPED, CANCELLED). A base run cannot succeed without each of its
// children, so for a child run the same state is emitted for its base run
// too, with the reason "child_" and the state's name in lower case.
func (e *runEvents) emitEnd(ev *sundialv1.RunEvent) {
	e.emit(ev)
	if e.run.GetBaseRunId() == "" {
		return
	}
	b := e.baseEvent(ev)
	b.Reason = reasonChild + strings.ToLower(strings.TrimPrefix(ev.GetState().String(), "RUN_STATE_"))
	e.emit(b)
}
