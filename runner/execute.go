package runner

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/sundialhq/sundial/internal/tracing"
	"github.com/sundialhq/sundial/leasing"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/breaker"
	"github.com/sundialhq/sundial/runner/target"
)

// Codes of failures the runner itself decides (RunError.code).
const (
	codeLeaseLost  = "lease_lost"
	codeInvalidRun = "invalid_run"
)

// Reasons of SKIPPED, CANCELLED and DEFERRED events.
const (
	reasonOverlapForbid = "overlap_forbid"
	reasonOverlapQueue  = "overlap_queue"
	reasonCircuitOpen   = "circuit_open"
	reasonReplaced      = "replaced"
	reasonTeamQuota     = "team_quota"
	reasonTeamRate      = "team_rate"
)

// errTimeout is the cause of an attempt's context when the job's timeout
// passes.
var errTimeout = errors.New("runner: attempt exceeded the job's timeout")

// execution is one delivery of a run being handled by a worker (handle).
type execution struct {
	r    *Runner
	rec  *record
	run  *sundialv1.Run
	logp *slog.Logger // made on first use: most runs log nothing
	// span is the delivery's span (runner.run), the parent of its lease's
	// and its attempt's; a no-op one with tracing off.
	span trace.Span
	// ev produces the delivery's events.
	ev *runEvents
	// poolBusy: the delivery found every pool slot busy under
	// BlockingDiscard, and is discarded (admit).
	poolBusy bool
}

// result is how the handling of one delivery ended.
type result int

const (
	// unfinished: the runner stopped first or the outcome could not be
	// made durable; the record must be handled again (handleRecord).
	unfinished result = iota
	// finished: the run's outcome is durable (its events acknowledged
	// and, for a retry or deferral, its due entry written); its offset may
	// be committed.
	finished
	// handedOff: the run's outcome is decided and its events produced; a
	// finishing goroutine took the record over to wait for their
	// acknowledgement. It finishes the record, or puts it back in its
	// queue.
	handedOff
)

// process handles one delivery of a record, poolBusy saying whether it
// found every pool slot busy under BlockingDiscard.
func (r *Runner) process(ctx context.Context, rec *record, poolBusy bool) result {
	run := rec.run
	if run == nil { // it did not decode when fetched
		run = &sundialv1.Run{}
		if err := decodeRun(rec.rec, run); err != nil {
			r.m.runs.WithLabelValues(outcomeMalformed).Inc()
			r.log.Error("skipping a record that is not a run", "topic", rec.tp.topic, "partition", rec.tp.partition, "offset", rec.rec.Offset, "err", err)
			return finished
		}
	}
	ctx, span := r.tracer.Start(tracing.WithTraceparent(ctx, run.GetTraceparent()), "runner.run", trace.WithSpanKind(trace.SpanKindConsumer))
	defer span.End()
	if span.IsRecording() { // tracing off: no attributes built
		span.SetAttributes(
			attribute.String("sundial.run_id", run.GetRunId()),
			attribute.String("sundial.job_id", run.GetJobId()),
			attribute.Int64("sundial.attempt", int64(run.GetAttempt())),
			attribute.String("messaging.destination.name", rec.tp.topic))
	}
	x := newExecution(r, rec, run)
	x.span, x.poolBusy = span, poolBusy
	x.ev.traceID = tracing.TraceID(ctx)
	res := x.handle(ctx)
	// A STARTED still held (events.go) was not followed by another event:
	// the delivery ended unfinished, and its start is told now.
	x.ev.releaseStarted(false)
	if res != unfinished {
		return res
	}
	r.m.runs.WithLabelValues(outcomeAborted).Inc()
	x.logger().Info("run not finished", "cause", context.Cause(ctx))
	return unfinished
}

// newExecution returns the execution of one delivery of run, read from rec.
func newExecution(r *Runner, rec *record, run *sundialv1.Run) *execution {
	x := &execution{r: r, rec: rec, run: run}
	x.ev = &runEvents{r: r, run: run, log: x.logger}
	if rec != nil {
		x.ev.received = rec.received
	}
	return x
}

// logger returns the execution's logger, which names the run.
func (x *execution) logger() *slog.Logger {
	if x.logp == nil {
		x.logp = x.r.log.With("job_id", x.run.GetJobId(), "run_id", x.run.GetRunId(), "attempt", x.run.GetAttempt())
		if x.ev.traceID != "" {
			x.logp = x.logp.With("trace_id", x.ev.traceID)
		}
	}
	return x.logp
}

// debugOn reports whether the runner logs at debug level. The run's
// logger is made only then: making it (slog's With) allocates on every
// run, and most deployments log at info.
func (x *execution) debugOn(ctx context.Context) bool { return x.r.log.Enabled(ctx, slog.LevelDebug) }

func decodeRun(rec *kgo.Record, run *sundialv1.Run) error {
	ct := ""
	for _, h := range rec.Headers {
		if h.Key == sundialv1.HeaderContentType {
			ct = string(h.Value)
		}
	}
	if err := sundialv1.Unmarshal(ct, rec.Value, run); err != nil {
		return err
	}
	switch {
	case run.GetRunId() == "":
		return errors.New("run_id is empty")
	case run.GetJobId() == "":
		return errors.New("job_id is empty")
	}
	if run.GetAttempt() == 0 {
		run.Attempt = 1
	}
	return nil
}

// handle is the life of one delivery of a run, in five steps, each of which
// returns how the delivery ended when it ends it:
//
//  1. admit: the run's executor, the pool's busy slots, its downstream's
//     breaker and its team's quotas let it through (or defer or skip it);
//  2. takeLease: the job's lease is taken under its overlap policy
//     (decideAcquire) and renewed by a Keeper;
//  3. beforeAttempt: a run cancelled, replaced or suspended before this
//     delivery is settled without executing;
//  4. attempt: the run's target executes once, and how it ended is judged
//     (classify);
//  5. settlement: the verdict is carried out (leaseAfter) and made durable.
//
// The steps that settle the delivery own what they are handed: once the
// Keeper is passed to conclude or suspend, they stop it (or hand it to the
// finishing goroutine of a success).
func (x *execution) handle(ctx context.Context) result {
	downstream := breaker.Key{Team: x.run.GetOwnerTeam(), Downstream: target.Downstream(x.run)}
	releaseTeam, res, ok := x.admit(ctx, downstream)
	if !ok {
		return res
	}
	defer releaseTeam()
	held, res := x.takeLease(ctx)
	if held == nil {
		return res
	}
	defer held.done()
	s := x.settle()
	switch step, reason := beforeAttempt(held.lease.Flagged); step {
	case endCancelled:
		x.logger().Info("run cancelled or replaced before this delivery; not executed", "reason", reason)
		return s.conclude(ctx, held.keeper, attemptEnd{}, verdict{kind: verdictCancelled, reason: reason})
	case suspendAgain:
		// A redelivery of a run whose runner died after its last
		// checkpoint, before SUSPENDED was out: suspend it again.
		return s.suspend(ctx, held.keeper, attemptEnd{})
	case startAttempt:
	}
	a := attempt{execution: x, held: held, downstream: downstream}
	end, suspended := a.execute(held.ctx)
	if suspended {
		return s.suspend(ctx, held.keeper, end)
	}
	return s.conclude(ctx, held.keeper, end, a.judge(ctx, end))
}

// heldLease is the job's lease held by a delivery, renewed by its Keeper.
type heldLease struct {
	lease  leasing.Lease
	keeper *leasing.Keeper
	// ctx ends when the lease is lost, the run is cancelled or replaced,
	// or the runner stops; cancel ends it with a cause.
	ctx    context.Context
	cancel context.CancelCauseFunc
	// latency is the trigger latency: from the attempt's due time to the
	// lease.
	latency time.Duration
	// done ends ctx and forgets the run among the runner's in-flight ones,
	// once the delivery is settled.
	done func()
}

// takeLease takes the run's lease (acquire) and starts its Keeper. It
// returns the held lease, or nil and how the delivery ended: settled as
// the acquire said (notAcquired), or unfinished when the lease expired
// before the Keeper started.
func (x *execution) takeLease(ctx context.Context) (*heldLease, result) {
	r := x.r
	// Judged before the acquire: it may wait for the Directory, which a
	// lease just taken must not.
	receipt := x.receiptWait(ctx)
	spanCtx, span := r.tracer.Start(ctx, "runner.lease")
	lease, acq := x.acquire(spanCtx)
	if span.IsRecording() {
		span.SetAttributes(attribute.Bool("sundial.acquired", acq.res == acquired), attribute.Int64("sundial.fencing_token", lease.Token))
	}
	span.End()
	if acq.res != acquired {
		return nil, x.settle().notAcquired(ctx, acq)
	}
	latency := x.leaseTaken(lease)
	x.ev.leased = r.cfg.Now()
	x.ev.wait = x.judgeWait(receipt)
	// The Keeper names the lease's job and run in its own log lines.
	// Its renewals share the Batcher's pipelines with the other runs'.
	keeper := r.leases.NewKeeper(lease, r.log)
	if err := keeper.Start(ctx); err != nil {
		// Trust ran out before the execution could start (a very slow
		// acquire): give the slot back; handleRecord tries again.
		x.logger().Warn("lease expired before the run started", "err", err)
		x.release(ctx, lease)
		return nil, unfinished
	}
	leaseCtx, cancelRun := context.WithCancelCause(keeper.Context())
	r.cancels.track(x.run.GetRunId(), cancelRun)
	return &heldLease{lease: lease, keeper: keeper, ctx: leaseCtx, cancel: cancelRun, latency: latency, done: func() {
		r.cancels.untrack(x.run.GetRunId())
		cancelRun(nil)
	}}, unfinished
}

// discard settles a run that found every pool slot busy under
// BlockingDiscard. The lease is asked for first, and given back at once: a
// redelivery of a run already done is a duplicate to drop, not a run to
// record as SKIPPED after its success, and the job's overlap policy still
// applies when the job's own slots are full.
func (x *execution) discard(ctx context.Context) result {
	lease, acq := x.acquire(ctx)
	if acq.res != acquired {
		return x.settle().notAcquired(ctx, acq)
	}
	x.release(ctx, lease)
	return x.settle().skip(ctx, reasonPoolBusy, "run skipped: every slot of the pool is busy (pool blocking discard)")
}

func attemptDue(run *sundialv1.Run) time.Time {
	if t := run.GetAttemptDueTime(); t != nil {
		return t.AsTime()
	}
	return run.GetDueTime().AsTime()
}

func queueDelay(run *sundialv1.Run, def time.Duration) time.Duration {
	if d := run.GetQueueDelay(); d != nil && d.AsDuration() > 0 {
		return d.AsDuration()
	}
	return def
}

func priorityLabel(p sundialv1.Priority) string {
	switch p {
	case sundialv1.Priority_PRIORITY_HIGH:
		return "high"
	case sundialv1.Priority_PRIORITY_LOW:
		return "low"
	}
	return "default"
}
