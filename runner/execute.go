package runner

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/checkpoint"
	"github.com/sundialhq/sundial/internal/backoff"
	"github.com/sundialhq/sundial/leasing"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/breaker"
	"github.com/sundialhq/sundial/runner/egress"
	"github.com/sundialhq/sundial/runner/retry"
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
	// ev produces the delivery's events.
	ev *runEvents
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

// process handles one delivery of a record.
func (r *Runner) process(ctx context.Context, rec *record) result {
	run := rec.run
	if run == nil { // it did not decode when fetched
		run = &sundialv1.Run{}
		if err := decodeRun(rec.rec, run); err != nil {
			r.m.runs.WithLabelValues(outcomeMalformed).Inc()
			r.log.Error("skipping a record that is not a run", "topic", rec.tp.topic, "partition", rec.tp.partition, "offset", rec.rec.Offset, "err", err)
			return finished
		}
	}
	x := newExecution(r, rec, run)
	res := x.handle(ctx)
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
	return x
}

// logger returns the execution's logger, which names the run.
func (x *execution) logger() *slog.Logger {
	if x.logp == nil {
		x.logp = x.r.log.With("job_id", x.run.GetJobId(), "run_id", x.run.GetRunId(), "attempt", x.run.GetAttempt())
	}
	return x.logp
}

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

// policy returns the run's lease limit and effective overlap policy.
func policy(run *sundialv1.Run) (int, sundialv1.OverlapPolicy) {
	limit := int(run.GetConcurrencyLimit())
	p := run.GetOverlapPolicy()
	if p == sundialv1.OverlapPolicy_OVERLAP_POLICY_UNSPECIFIED {
		p = sundialv1.OverlapPolicy_OVERLAP_POLICY_ALLOW
		if limit > 0 {
			p = sundialv1.OverlapPolicy_OVERLAP_POLICY_FORBID
		}
	}
	if p == sundialv1.OverlapPolicy_OVERLAP_POLICY_ALLOW {
		return allowLimit, p
	}
	return max(limit, 1), p
}

// acquireResult says how acquiring ended when no lease was taken.
type acquireResult int

const (
	acquired acquireResult = iota
	alreadyDone
	forbidden
	queued
	invalidRun
	aborted
	// endedCancelled: the run was cancelled or replaced before this
	// delivery (endedBefore), and its job's slots are full.
	endedCancelled
)

// acquireOutcome is how a lease acquire ended.
type acquireOutcome struct {
	res acquireResult
	// reason: endedCancelled: the reason of the CANCELLED (endedBefore).
	reason string
	// err: invalidRun and aborted: why.
	err error
}

// handle is the life of one delivery of a run: take the lease, execute one
// attempt under it, then carry out the verdict on how the attempt ended
// (classify). Each step returns how the delivery ended, and the steps that
// settle it own what they are handed: once the Keeper is passed to
// conclude or suspend, they stop it (or hand it to the finishing goroutine
// of a success).
func (x *execution) handle(ctx context.Context) result {
	r := x.r
	// A routed record reaches a worker only when it came back to its
	// queue (retryLater) before its executor was chosen.
	if r.needsRoute(x.rec) {
		if res, here := x.route(ctx); !here {
			return res
		}
	}
	if x.rec.poolBusy {
		return x.discard(ctx)
	}
	downstream := breaker.Key{Team: x.run.GetOwnerTeam(), Downstream: target.Downstream(x.run)}
	if r.breakers.Open(downstream) {
		return x.settle().deferRun(ctx, r.breakers.OpenTimeout(), reasonCircuitOpen, nil)
	}
	// The team's slot is taken before the job's and given back when the
	// attempt ends.
	releaseTeam, teamRes, wait := x.takeTeamSlot(ctx)
	switch teamRes {
	case teamFull:
		r.m.teamDeferrals.WithLabelValues(x.run.GetOwnerTeam()).Inc()
		return x.settle().deferRun(ctx, x.teamQuotaDelay(), reasonTeamQuota, nil)
	case teamRate:
		r.m.teamRateDeferrals.WithLabelValues(x.run.GetOwnerTeam()).Inc()
		return x.settle().deferRun(ctx, wait, reasonTeamRate, nil)
	case teamAborted:
		return unfinished
	}
	defer releaseTeam()
	lease, acq := x.acquire(ctx)
	if acq.res != acquired {
		return x.settle().notAcquired(ctx, acq)
	}
	latency := x.leaseTaken(lease)

	// The Keeper names the lease's job and run in its own log lines.
	// Its renewals share the Batcher's pipelines with the other runs'.
	keeper := r.leases.NewKeeper(lease, r.log)
	if err := keeper.Start(ctx); err != nil {
		// Trust ran out before the execution could start (a very slow
		// acquire): give the slot back; handleRecord tries again.
		x.logger().Warn("lease expired before the run started", "err", err)
		x.release(ctx, lease)
		return unfinished
	}
	leaseCtx, cancelRun := context.WithCancelCause(keeper.Context())
	defer cancelRun(nil)
	r.trackInflight(x.run.GetRunId(), cancelRun)
	defer r.untrackInflight(x.run.GetRunId())

	if reason, ended := endedBefore(lease.Flagged); ended {
		x.logger().Info("run cancelled or replaced before this delivery; not executed", "reason", reason)
		return x.settle().conclude(ctx, keeper, attemptEnd{}, verdict{kind: verdictCancelled, reason: reason})
	}
	if flagged(lease.Flagged, flagSuspend) {
		// A redelivery of a run whose runner died after its last
		// checkpoint, before SUSPENDED was out: suspend it again.
		return x.settle().suspend(ctx, keeper, attemptEnd{})
	}
	sess := x.session(lease.Token, cancelRun)
	end := x.attempt(checkpoint.NewContext(leaseCtx, sess), downstream, lease.Token, latency)
	if sess != nil && sess.Suspended() && end.err != nil {
		return x.settle().suspend(ctx, keeper, end)
	}
	return x.settle().conclude(ctx, keeper, end, x.judge(ctx, end))
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

// leaseTaken records a lease taken for the run and returns the trigger
// latency: from the attempt's due time to now.
func (x *execution) leaseTaken(lease leasing.Lease) time.Duration {
	r := x.r
	latency := r.cfg.Now().Sub(attemptDue(x.run))
	r.m.triggerLatency.WithLabelValues(priorityLabel(x.run.GetPriority())).Observe(max(latency, 0).Seconds())
	r.m.leases.WithLabelValues(leaseAcquired).Inc()
	x.ev.token = lease.Token
	return latency
}

// attempt executes the run once, through its downstream's breaker and
// under the job's timeout, within leaseCtx, which ends when the lease is
// lost, the run is replaced or the runner stops.
func (x *execution) attempt(leaseCtx context.Context, downstream breaker.Key, token int64, latency time.Duration) attemptEnd {
	r, run := x.r, x.run
	end := attemptEnd{timeout: r.cfg.RunTimeout}
	if d := run.GetTimeout(); d != nil && d.AsDuration() > 0 {
		end.timeout = d.AsDuration()
	}
	attemptCtx, cancel := context.WithTimeoutCause(leaseCtx, end.timeout, errTimeout)
	defer cancel()
	end.err = r.breakers.Do(downstream, func() error {
		end.started = r.cfg.Now()
		x.ev.emit(x.ev.event(sundialv1.RunState_RUN_STATE_STARTED, nil))
		x.logger().Debug("run started", "fencing_token", token, "trigger_latency", latency)
		x.ev.out = &target.Output{}
		return r.targets.Execute(attemptCtx, target.Request{Run: run, FencingToken: token, Output: x.ev.out})
	})
	end.finished = r.cfg.Now()
	var refusal *egress.Refusal
	if errors.As(end.err, &refusal) {
		r.m.egressRefusals.WithLabelValues(refusal.Team, refusal.Kind).Inc()
	}
	if attemptCtx.Err() != nil {
		end.cause = context.Cause(attemptCtx)
	}
	return end
}

// judge classifies how the attempt ended. A REPLACE revocation ends the
// lease too, and only Redis tells a run replaced from a lease lost
// otherwise, so a lost lease is checked there before it counts as a
// failure.
func (x *execution) judge(ctx context.Context, end attemptEnd) verdict {
	r, run := x.r, x.run
	rs := x.retryState()
	v := classify(end, rs)
	if v.leaseLost || v.kind == verdictCancelled {
		cancelled, err := r.markerSet(ctx, cancelledKey(r.cfg.KeyPrefix, run.GetJobId(), run.GetRunId()))
		if err != nil {
			return x.undecided(err)
		}
		if cancelled {
			end.cancelled = true
			v = classify(end, rs)
		}
	}
	if v.leaseLost {
		replaced, err := r.markerSet(ctx, r.replacedKey(run.GetJobId(), run.GetRunId()))
		if err != nil {
			return x.undecided(err)
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
func (x *execution) undecided(err error) verdict {
	x.logger().Warn("cannot tell whether the run was cancelled or replaced; it will be delivered again", "err", err)
	return verdict{kind: verdictUnfinished, release: true}
}

// retryState is what the retry policy needs to decide after an attempt.
func (x *execution) retryState() retryState {
	run := x.run
	return retryState{
		policy:  retry.FromProto(run.GetRetry()),
		attempt: budgetAttempt(run),
		jitter:  x.r.cfg.Jitter(run.GetRunId(), run.GetAttempt()),
	}
}

// acquire takes the run's lease, applying the overlap policy when the job's
// slots are full. It waits while another holder has the same run, and
// retries while Redis is unreachable, until ctx ends.
func (x *execution) acquire(ctx context.Context) (leasing.Lease, acquireOutcome) {
	r, run := x.r, x.run
	limit, pol := policy(run)
	// The cancel, replace and suspend markers are read by the acquire
	// itself: no round trip of their own for every run.
	req := leasing.Request{JobID: run.GetJobId(), RunID: run.GetRunId(), Limit: limit,
		Flags: []string{cancelledKey(r.cfg.KeyPrefix, run.GetJobId(), run.GetRunId()), r.replacedKey(run.GetJobId(), run.GetRunId())}}
	if r.cfg.Checkpoints != nil {
		req.Flags = append(req.Flags, suspendKey(r.cfg.KeyPrefix, req.JobID, req.RunID))
	}
	retry := backoff.New(50*time.Millisecond, 5*time.Second)
	signalled := map[string]time.Time{}
	revoked := map[string]bool{}
	for {
		lease, err := r.leases.Acquire(ctx, req)
		step, out, label := decideAcquire(err, pol, ctx.Err() != nil)
		if label != "" {
			r.m.leases.WithLabelValues(label).Inc()
		}
		wait := r.cfg.HeldRetry
		switch step {
		case stepSettled:
			if out.res != acquired {
				lease = leasing.Lease{}
			}
			return lease, out
		case stepWaitHolder:
			x.logger().Debug("run is leased by another holder; waiting", "retry_in", wait)
		case stepReplace:
			var ns *leasing.NoSlotError
			if errors.As(err, &ns) && len(ns.Holders) > 0 {
				x.replace(ctx, ns.Holders[0], signalled, revoked)
			}
			wait = min(wait, 50*time.Millisecond)
		case stepRetry:
			wait = retry.Next()
			x.logger().Warn("lease acquire failed; retrying", "err", err, "retry_in", wait)
		}
		if !backoff.Sleep(ctx, wait) {
			return leasing.Lease{}, acquireOutcome{res: aborted, err: ctx.Err()}
		}
	}
}

// replace asks the execution of holder to stop: first by signal, then, after
// the grace period, by revoking its lease.
func (x *execution) replace(ctx context.Context, holder string, signalled map[string]time.Time, revoked map[string]bool) {
	r, run := x.r, x.run
	now := r.cfg.Now()
	at, ok := signalled[holder]
	switch {
	case !ok:
		signalled[holder] = now
		if err := r.signalReplace(ctx, run.GetJobId(), holder); err != nil {
			x.logger().Warn("replace signal failed", "holder", holder, "err", err)
		}
		x.logger().Info("replacing the running execution of the job", "holder", holder)
	case !revoked[holder] && now.Sub(at) >= r.cfg.ReplaceGrace:
		revoked[holder] = true
		if _, err := r.cfg.Leases.Revoke(ctx, run.GetJobId(), holder); err != nil {
			x.logger().Warn("revoke failed", "holder", holder, "err", err)
		}
		x.logger().Info("holder did not stop on the signal; lease revoked", "holder", holder)
	}
}

// release gives the lease back, best effort: an error only delays the slot
// until the lease expires.
func (x *execution) release(ctx context.Context, l leasing.Lease) {
	if x.r.isKilled() || l.Token == 0 {
		return
	}
	// The release must be tried even when the run's context has ended (a
	// cancelled or timed-out run frees its slot at once).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := x.r.leases.Release(ctx, l); err != nil && !errors.Is(err, leasing.ErrLeaseLost) {
		x.logger().Warn("lease release failed; the slot frees when the lease expires", "err", err)
	}
}

// retryRedis calls fn until it succeeds, fails for good, or 5 seconds pass.
func (x *execution) retryRedis(ctx context.Context, fn func(context.Context) error) error {
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	retry := backoff.New(20*time.Millisecond, time.Second)
	for {
		err := fn(c)
		if err == nil || !leasing.IsRetryable(err) {
			return err
		}
		if !retry.Wait(c) {
			return err
		}
	}
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
