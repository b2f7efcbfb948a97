package runner

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sundialhq/sundial/checkpoint"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/breaker"
	"github.com/sundialhq/sundial/runner/egress"
	"github.com/sundialhq/sundial/runner/retry"
	"github.com/sundialhq/sundial/runner/target"
)

// attempt is one execution of the run under the delivery's lease: it runs
// the run's target once (execute), then judges how that ended (judge).
type attempt struct {
	*execution
	held       *heldLease
	downstream breaker.Key
}

// execute runs the attempt within leaseCtx, the held lease's context, with
// the run's checkpoint session, and reports how it ended and whether it
// ended by a suspension at a checkpoint.
func (a attempt) execute(leaseCtx context.Context) (end attemptEnd, suspended bool) {
	sess := a.session(a.held.lease.Token, a.held.cancel)
	end = a.runTarget(checkpoint.NewContext(leaseCtx, sess))
	return end, sess != nil && sess.Suspended() && end.err != nil
}

// runTarget executes the run once, through its downstream's breaker and under
// the job's timeout, within leaseCtx, which ends when the lease is lost, the
// run is replaced or the runner stops.
func (a attempt) runTarget(leaseCtx context.Context) attemptEnd {
	r, run, token := a.r, a.run, a.held.lease.Token
	end := attemptEnd{timeout: r.cfg.RunTimeout}
	if d := run.GetTimeout(); d != nil && d.AsDuration() > 0 {
		end.timeout = d.AsDuration()
	}
	attemptCtx, cancel := context.WithTimeoutCause(leaseCtx, end.timeout, errTimeout)
	defer cancel()
	// The lease's context does not descend from the delivery's: the
	// attempt's span is put under the delivery's span explicitly.
	attemptCtx, span := r.tracer.Start(trace.ContextWithSpan(attemptCtx, a.span), "runner.attempt", trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(attribute.String("sundial.downstream", a.downstream.Downstream), attribute.Int64("sundial.fencing_token", token))
	}
	end.err = r.breakers.Do(a.downstream, func() error {
		end.started = r.cfg.Now()
		a.ev.started = end.started
		a.ev.emitStarted(a.ev.event(sundialv1.RunState_RUN_STATE_STARTED, nil)) //nolint:contextcheck // produced detached from the attempt, which may end first
		if a.debugOn(attemptCtx) {
			a.logger().Debug("run started", "fencing_token", token, "trigger_latency", a.held.latency)
		}
		// The attempt's lines also go to its live tail as they are logged;
		// the tail's end is written with the shipper's next write, off the
		// attempt's path.
		tail := r.logs.Open(run.GetJobId(), run.GetRunId(), run.GetAttempt())
		defer tail.Close()
		a.ev.out = &target.Output{Tail: tail}
		return r.targets.Execute(attemptCtx, target.Request{Run: run, FencingToken: token, Output: a.ev.out})
	})
	end.finished = r.cfg.Now()
	var refusal *egress.Refusal
	if errors.As(end.err, &refusal) {
		r.m.egressRefusals.WithLabelValues(refusal.Team, refusal.Kind).Inc()
	}
	if attemptCtx.Err() != nil {
		end.cause = context.Cause(attemptCtx)
	}
	if end.err != nil {
		span.SetStatus(codes.Error, end.err.Error())
	}
	return end
}

// judge classifies how the attempt ended. A REPLACE revocation ends the
// lease too, and only Redis tells a run replaced from a lease lost
// otherwise, so a lost lease is checked there before it counts as a
// failure.
func (a attempt) judge(ctx context.Context, end attemptEnd) verdict {
	r, run := a.r, a.run
	rs := a.retryState()
	v := classify(end, rs)
	if v.leaseLost || v.kind == verdictCancelled {
		cancelled, err := r.marks.set(ctx, cancelledKey(r.cfg.KeyPrefix, run.GetJobId(), run.GetRunId()))
		if err != nil {
			return a.undecided(err)
		}
		if cancelled {
			end.cancelled = true
			v = classify(end, rs)
		}
	}
	if v.leaseLost {
		replaced, err := r.marks.set(ctx, replacedKey(r.cfg.KeyPrefix, run.GetJobId(), run.GetRunId()))
		if err != nil {
			return a.undecided(err)
		}
		if replaced {
			end.replaced = true
			v = classify(end, rs)
		}
	}
	if v.leaseLost {
		r.m.leaseLost.Inc()
	}
	return v
}

// undecided is the verdict on an attempt whose markers Redis did not
// answer before the runner stopped: the record is left unfinished, to be
// delivered again, rather than judged failed (and retried) when an operator
// may have cancelled it.
func (a attempt) undecided(err error) verdict {
	a.logger().Warn("cannot tell whether the run was cancelled or replaced; it will be delivered again", "err", err)
	return verdict{kind: verdictUnfinished, release: true}
}

// retryState is what the retry policy needs to decide after an attempt.
func (a attempt) retryState() retryState {
	run := a.run
	return retryState{
		policy:  retry.FromProto(run.GetRetry()),
		attempt: budgetAttempt(run),
		jitter:  a.r.cfg.Jitter(run.GetRunId(), run.GetAttempt()),
	}
}

// session returns the checkpoint session of the attempt under token, or
// nil without a checkpoint store. A save that finds the run to suspend
// cancels the attempt with checkpoint.ErrSuspended.
func (a attempt) session(token int64, cancel context.CancelCauseFunc) *checkpoint.Session {
	r, run := a.r, a.run
	if r.cfg.Checkpoints == nil {
		return nil
	}
	return checkpoint.NewSession(checkpoint.SessionConfig{
		Store: r.cfg.Checkpoints, RunID: run.GetRunId(), Attempt: run.GetAttempt(), FencingToken: token, Now: r.cfg.Now,
		SuspendRequested: func(ctx context.Context) bool {
			return r.marks.suspendRequested(context.WithoutCancel(ctx), run.GetJobId(), run.GetRunId())
		},
		OnSuspend: func() { cancel(checkpoint.ErrSuspended) },
	})
}
