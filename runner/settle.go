package runner

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/checkpoint"
	"github.com/sundialhq/sundial/internal/backoff"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/leasing"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/target"
	"github.com/sundialhq/sundial/store"
)

// settlement is the last step of a delivery: it makes the delivery's
// outcome durable (its events, the next attempt's or the deferral's due
// entry, the dead letter, the suspension) and returns how the delivery
// ended. Each of its methods settles one kind of outcome, and owns the
// lease or Keeper it is handed: every path stops the Keeper and releases
// the lease, lets it expire, or hands it to the finishing goroutine of a
// success (finishAfterAcks).
type settlement struct{ *execution }

// settle returns the settlement of the delivery.
func (x *execution) settle() settlement { return settlement{x} }

// conclude carries out the verdict on an attempt. It owns keeper: what
// becomes of the lease is decided first (leaseAfter), then the run is
// settled as the verdict says.
func (s settlement) conclude(ctx context.Context, keeper *leasing.Keeper, end attemptEnd, v verdict) result {
	switch leaseAfter(v) {
	case leaseHandOver:
		return s.succeeded(ctx, keeper, end.started, end.finished)
	case leaseReleaseNow:
		keeper.Stop()
		s.release(ctx, keeper.Lease()) // fails harmlessly when the lease was revoked
	case leaseReleaseAfter, leaseAbandon:
		keeper.Stop()
	}
	switch v.kind {
	case verdictDefer:
		return s.deferRun(ctx, v.delay, v.reason, nil)
	case verdictUnfinished:
		return unfinished
	case verdictCancelled:
		return s.cancelled(ctx, v.reason, durationpb.New(end.finished.Sub(end.started)))
	}
	return s.failed(ctx, keeper.Lease(), v, end.started, end.finished)
}

// notAcquired settles a delivery whose lease acquire ended without a
// lease, as acq says.
func (s settlement) notAcquired(ctx context.Context, acq acquireOutcome) result {
	r := s.r
	switch acq.res {
	case alreadyDone:
		r.m.runs.WithLabelValues(outcomeDuplicate).Inc()
		if s.debugOn(ctx) {
			s.logger().Debug("run already done; skipped")
		}
		return finished
	case forbidden:
		return s.skip(ctx, reasonOverlapForbid, "run skipped: the job's concurrency limit is reached (overlap policy forbid)")
	case queued:
		return s.deferRun(ctx, queueDelay(s.run, r.cfg.QueueDelay), reasonOverlapQueue, nil)
	case invalidRun:
		return s.dead(ctx, &target.Error{Code: codeInvalidRun, Message: acq.err.Error()}, nil, 0)
	case endedCancelled:
		return s.cancelled(ctx, acq.reason, nil)
	}
	return unfinished // aborted: ctx ended
}

// cancelled records the run as CANCELLED with reason (and the attempt's
// duration, nil when it never executed); it is not retried.
func (s settlement) cancelled(ctx context.Context, reason string, dur *durationpb.Duration) result {
	s.r.m.runs.WithLabelValues(outcomeCancelled).Inc()
	s.ev.emitEnd(s.ev.event(sundialv1.RunState_RUN_STATE_CANCELLED, func(ev *sundialv1.RunEvent) {
		ev.Reason = reason
		ev.Duration = dur
	}))
	s.logger().Info("run cancelled", "reason", reason)
	return s.finishAfterAcks(ctx, nil, nil)
}

// skip records the run as SKIPPED with reason; it is not retried.
func (s settlement) skip(ctx context.Context, reason, msg string) result {
	s.r.m.runs.WithLabelValues(outcomeSkipped).Inc()
	s.ev.emitEnd(s.ev.event(sundialv1.RunState_RUN_STATE_SKIPPED, func(ev *sundialv1.RunEvent) { ev.Reason = reason }))
	s.logger().Info(msg)
	return s.finishAfterAcks(ctx, nil, nil)
}

// succeeded records a success. The SUCCEEDED event is produced, and the
// rest is left to a finishing goroutine, so the worker takes its next run
// without waiting for Kafka and Redis: the events acknowledged first, then
// the dedupe mark (leasing Complete, pipelined with other runs'), so a crash
// in between re-executes the run (absorbed by the idempotency key) rather
// than losing its event; only then may the offset be committed. The Keeper
// renews the lease until the dedupe mark is written; when an event was not
// acknowledged, the lease is released instead.
func (s settlement) succeeded(ctx context.Context, keeper *leasing.Keeper, started, finished time.Time) result {
	r := s.r
	dur := finished.Sub(started)
	all := false
	if s.run.GetBaseRunId() != "" {
		// Recorded before the dedupe mark: a crash in between executes
		// the child again and asks again (fanout.go).
		var err error
		if all, err = r.marks.childSucceeded(ctx, s.run); err != nil {
			s.logger().Warn("finished child not recorded; the run will be delivered again", "err", err)
			keeper.Stop()
			s.release(ctx, keeper.Lease())
			return unfinished
		}
	}
	ev := s.ev.event(sundialv1.RunState_RUN_STATE_SUCCEEDED, func(ev *sundialv1.RunEvent) {
		ev.Duration = durationpb.New(dur)
	})
	s.ev.emit(ev)
	if all {
		s.ev.emit(s.ev.baseEvent(ev))
	}
	// The finishing goroutine owns the Keeper from here: it renews the
	// lease until the dedupe mark.
	return s.finishAfterAcks(ctx, func() {
		keeper.Stop()
		l := keeper.Lease()
		if err := s.retryRedis(ctx, func(c context.Context) error { return r.leases.Complete(c, l) }); err != nil {
			// The effect happened and its event is out; a redelivery would
			// execute again, which the downstream absorbs by the run id.
			s.logger().Warn("could not set the run's dedupe mark", "err", err)
		}
		r.m.runs.WithLabelValues(outcomeSucceeded).Inc()
		if s.debugOn(ctx) {
			s.logger().Debug("run succeeded", "duration", dur)
		}
	}, func() {
		keeper.Stop()
		s.release(ctx, keeper.Lease())
	})
}

// finishAfterAcks hands the record to a finishing goroutine and returns
// handedOff: the worker does not wait for the acknowledgement of the events it
// produced. The goroutine waits for them, then calls acked and finishes the
// record, so its offset becomes committable only once its events are
// durable. When an event was not acknowledged it calls notAcked (if set)
// and puts the record back in its queue after a backoff, as handleRecord
// would try it again. It frees the in-flight slot the record's worker took.
func (s settlement) finishAfterAcks(ctx context.Context, acked, notAcked func()) result {
	r := s.r
	r.tails.finish(ctx, s.rec, false, func() bool {
		if !s.ev.flush(ctx) {
			if notAcked != nil {
				notAcked()
			}
			r.m.runs.WithLabelValues(outcomeAborted).Inc()
			return false
		}
		if acked != nil {
			acked()
		}
		return true
	})
	return handedOff
}

// failed records a failed attempt (FAILED or TIMED_OUT), then, as the
// verdict says, schedules the next attempt or declares the run dead.
func (s settlement) failed(ctx context.Context, lease leasing.Lease, v verdict, started, finished time.Time) result {
	r, run, f := s.r, s.run, v.failure
	runErr := &sundialv1.RunError{Code: f.Code, Message: f.Message, Retryable: f.Retryable}
	outcome := outcomeFailed
	if v.state == sundialv1.RunState_RUN_STATE_TIMED_OUT {
		outcome = outcomeTimedOut
	}
	r.m.runs.WithLabelValues(outcome).Inc()
	s.ev.emit(s.ev.event(v.state, func(ev *sundialv1.RunEvent) {
		ev.Error = runErr
		ev.Duration = durationpb.New(finished.Sub(started))
	}))
	if v.kind == verdictDead {
		s.logger().Info("run failed for good", "code", f.Code, "err", f.Message, "reason", v.reason)
		return s.dead(ctx, f, &lease, finished.Sub(started))
	}
	due := store.Truncate(r.cfg.Now().Add(v.delay))
	next := proto.Clone(run).(*sundialv1.Run)
	next.Attempt = run.GetAttempt() + 1
	next.AttemptDueTime = timestamppb.New(due)
	next.Origin = sundialv1.RunOrigin_RUN_ORIGIN_RETRY
	next.DispatchedAt = nil
	if !s.enqueue(ctx, next, due, int(next.Attempt)) {
		s.release(ctx, lease)
		return unfinished
	}
	r.m.retries.Inc()
	r.m.runs.WithLabelValues(outcomeRetrying).Inc()
	s.ev.emit(s.ev.event(sundialv1.RunState_RUN_STATE_RETRYING, func(ev *sundialv1.RunEvent) {
		ev.Error = runErr
		ev.NextAttemptDueTime = timestamppb.New(due)
	}))
	s.logger().Info("run failed; retry scheduled", "code", f.Code, "err", f.Message, "next_attempt", next.Attempt, "due", due)
	// The next attempt is durable (enqueued above); only the commit waits
	// for the events.
	s.release(ctx, lease)
	return s.finishAfterAcks(ctx, nil, nil)
}

// dead writes the run to the dead-letter topic and records DEAD. lease, when
// not nil, is released afterwards: a dead run has no dedupe mark, so a
// replay can run it again.
// dur is how long the last attempt executed, 0 when it did not start.
func (s settlement) dead(ctx context.Context, f *target.Error, lease *leasing.Lease, dur time.Duration) result {
	r, run := s.r, s.run
	runErr := &sundialv1.RunError{Code: f.Code, Message: f.Message, Retryable: f.Retryable}
	dl := &sundialv1.DeadLetter{Run: run, LastError: runErr, Attempts: run.GetAttempt(), DeadAt: timestamppb.New(r.cfg.Now()), RunnerId: r.cfg.ID}
	val, err := proto.Marshal(dl)
	if err == nil {
		err = r.producer.ProduceSync(ctx, &kgo.Record{Topic: r.cfg.Topics.DLQ(), Key: []byte(run.GetJobId()), Value: val, Headers: topics.ProtobufHeaders(dl)}).FirstErr()
	}
	if err != nil {
		s.logger().Error("could not write the dead letter; the run will be delivered again", "err", err)
		if lease != nil {
			s.release(ctx, *lease)
		}
		return unfinished
	}
	r.m.deadLetters.Inc()
	r.m.runs.WithLabelValues(outcomeDead).Inc()
	s.ev.emitEnd(s.ev.event(sundialv1.RunState_RUN_STATE_DEAD, func(ev *sundialv1.RunEvent) {
		ev.Error = runErr
		if dur > 0 {
			// The history keeps the last attempt's duration on the dead
			// run's record.
			ev.Duration = durationpb.New(dur)
		}
	}))
	if lease != nil {
		s.release(ctx, *lease)
	}
	return s.finishAfterAcks(ctx, nil, nil)
}

// deferRun writes the same attempt as a due entry after delay and records
// DEFERRED; no attempt is spent. lease, when not nil, is released.
func (s settlement) deferRun(ctx context.Context, delay time.Duration, reason string, lease *leasing.Lease) result {
	return s.deferRunFor(ctx, delay, reason, "", lease)
}

// deferRunWhy is deferRun of a run that holds no lease, with why the
// event's error message (the code is reason): what the reason alone does
// not say, such as the pool no worker serves.
func (s settlement) deferRunWhy(ctx context.Context, delay time.Duration, reason, why string) result {
	return s.deferRunFor(ctx, delay, reason, why, nil)
}

func (s settlement) deferRunFor(ctx context.Context, delay time.Duration, reason, why string, lease *leasing.Lease) result {
	r, run := s.r, s.run
	due := store.Truncate(r.cfg.Now().Add(delay))
	next := proto.Clone(run).(*sundialv1.Run)
	next.AttemptDueTime = timestamppb.New(due)
	next.Origin = sundialv1.RunOrigin_RUN_ORIGIN_DEFERRAL
	next.DispatchedAt = nil
	if lease != nil {
		defer s.release(ctx, *lease)
	}
	if !s.enqueue(ctx, next, due, int(run.GetAttempt())) {
		return unfinished
	}
	r.m.runs.WithLabelValues(outcomeDeferred).Inc()
	s.ev.emit(s.ev.event(sundialv1.RunState_RUN_STATE_DEFERRED, func(ev *sundialv1.RunEvent) {
		ev.Reason = reason
		ev.NextAttemptDueTime = timestamppb.New(due)
		if why != "" {
			ev.Error = &sundialv1.RunError{Code: reason, Message: why}
		}
	}))
	s.logger().Info("run deferred", "reason", reason, "due", due)
	return s.finishAfterAcks(ctx, nil, nil)
}

// enqueue writes next as a KindRetry due entry at due, retrying until it is
// durable or ctx ends.
func (s settlement) enqueue(ctx context.Context, next *sundialv1.Run, due time.Time, attempt int) bool {
	payload, err := proto.Marshal(next)
	if err != nil {
		s.logger().Error("cannot encode the run for its due entry", "err", err)
		return false
	}
	entry := store.DueEntry{
		Due: due, JobID: next.GetJobId(), Kind: store.KindRetry, RunID: next.GetRunId(),
		Attempt: attempt, Revision: max(next.GetDefinitionOffset(), 0), Payload: payload,
	}
	retry := backoff.New(100*time.Millisecond, 5*time.Second)
	for {
		err := s.r.cfg.Enqueuer.Enqueue(ctx, entry)
		if err == nil {
			return true
		}
		if ctx.Err() != nil || s.r.isKilled() {
			return false
		}
		s.logger().Warn("enqueue failed; retrying", "err", err, "retry_within", retry.Peek())
		if !retry.Wait(ctx) {
			return false
		}
	}
}

// suspend records the run suspended, releases its lease and emits
// SUSPENDED. The suspension is stored before the event, so a crash in
// between leaves a redelivery that suspends the run again. It owns keeper:
// every path stops it.
func (s settlement) suspend(ctx context.Context, keeper *leasing.Keeper, end attemptEnd) result {
	r, run := s.r, s.run
	if r.isKilled() {
		keeper.Stop()
		return unfinished // a dead process writes nothing more
	}
	enc, err := proto.Marshal(run)
	if err != nil {
		s.logger().Error("cannot encode the run to suspend", "err", err)
		keeper.Stop()
		s.release(ctx, keeper.Lease())
		return unfinished
	}
	sp := checkpoint.Suspension{RunID: run.GetRunId(), JobID: run.GetJobId(), Run: enc}
	retry := backoff.New(100*time.Millisecond, 5*time.Second)
	for {
		err := r.cfg.Checkpoints.MarkSuspended(ctx, sp, s.ev.token)
		if err == nil {
			break
		}
		if errors.Is(err, checkpoint.ErrStale) {
			// A newer lease holds the run: it is that holder's to settle.
			s.logger().Warn("run taken over before it could be suspended", "err", err)
			keeper.Stop()
			return finished
		}
		s.logger().Warn("cannot mark the run suspended; retrying", "err", err, "retry_within", retry.Peek())
		if !retry.Wait(ctx) {
			keeper.Stop()
			s.release(ctx, keeper.Lease())
			return unfinished
		}
	}
	keeper.Stop()
	s.release(ctx, keeper.Lease())
	r.m.runs.WithLabelValues(outcomeSuspended).Inc()
	s.ev.emit(s.ev.event(sundialv1.RunState_RUN_STATE_SUSPENDED, func(ev *sundialv1.RunEvent) {
		ev.Reason = reasonSuspended
		if !end.started.IsZero() {
			ev.Duration = durationpb.New(end.finished.Sub(end.started))
		}
		ev.Log = s.ev.out.Lines()
	}))
	s.logger().Info("run suspended")
	return s.finishAfterAcks(ctx, nil, nil)
}
