package runner

import (
	"errors"
	"fmt"
	"time"

	"github.com/sundialhq/sundial/leasing"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/breaker"
	"github.com/sundialhq/sundial/runner/retry"
	"github.com/sundialhq/sundial/runner/target"
)

// attemptEnd is how an attempt ended.
type attemptEnd struct {
	// err is what the target returned, or the breaker's *breaker.OpenError
	// when nothing was sent.
	err error
	// cause is why the attempt's context ended (errTimeout, errShutdown,
	// errKilled, errReplaced, leasing.ErrLeaseLost); nil if it had not.
	cause error
	// timeout is the attempt's timeout, for the failure's message.
	timeout time.Duration
	// started and finished bound the attempt; started is zero when
	// nothing was sent.
	started, finished time.Time
	// replaced: the run's REPLACE marker exists. It is asked of Redis
	// only when the lease was lost mid-attempt, which a replacing run's
	// revocation causes too.
	replaced bool
	// cancelled: an operator cancelled the run (its marker exists),
	// asked of Redis only when the attempt was stopped by a signal or a
	// lost lease.
	cancelled bool
}

// verdictKind is what becomes of a run after an attempt.
type verdictKind int

const (
	// verdictSucceeded is final: SUCCEEDED.
	verdictSucceeded verdictKind = iota
	// verdictCancelled is final: CANCELLED, a newer run of the job took
	// the slot (overlap policy REPLACE) or an operator cancelled the run.
	verdictCancelled
	// verdictDefer: DEFERRED, the same attempt is due again after delay;
	// nothing was sent, so no attempt is spent.
	verdictDefer
	// verdictRetry: FAILED or TIMED_OUT, then RETRYING; the next attempt
	// is due after delay.
	verdictRetry
	// verdictDead: FAILED or TIMED_OUT, then DEAD; the retry policy allows
	// no further attempt.
	verdictDead
	// verdictUnfinished: the runner stops or was killed; no event, and the
	// record is delivered again.
	verdictUnfinished
)

// verdict is the classifier's decision on an attempt.
type verdict struct {
	kind verdictKind
	// delay: defer and retry: how long until the next attempt is due.
	delay time.Duration
	// reason: defer and cancelled: the event's reason; dead: why the
	// retry policy gave up (retry.Decision.Reason).
	reason string
	// failure and state: retry and dead: the attempt's error and its
	// event's state (FAILED or TIMED_OUT).
	failure *target.Error
	state   sundialv1.RunState
	// leaseLost: retry and dead: the failure is the lease's loss.
	leaseLost bool
	// release: unfinished: the lease is given back. A killed runner
	// leaves its leases to expire, as a crashed one would.
	release bool
}

// retryState is what the retry policy needs to decide after a failure.
type retryState struct {
	policy retry.Policy
	// attempt is the failed attempt, 1 for the first.
	attempt int
	// jitter is the full-jitter draw in [0, 1) (Config.Jitter).
	jitter float64
}

// classify decides what becomes of a run after an attempt ended. It does no
// I/O; settlement.conclude carries the verdict out. The order matters: a
// success counts even if the context ended as the target answered, and
// the runner's own cancellations (stop, kill, replace) are no failure of
// the run.
func classify(end attemptEnd, rs retryState) verdict {
	var open *breaker.OpenError
	switch {
	case errors.As(end.err, &open):
		// A half-open breaker with its probes out: nothing was sent.
		return verdict{kind: verdictDefer, delay: open.RetryIn, reason: reasonCircuitOpen}
	case end.err == nil:
		return verdict{kind: verdictSucceeded}
	case errors.Is(end.cause, errKilled):
		return verdict{kind: verdictUnfinished}
	case errors.Is(end.cause, errShutdown):
		return verdict{kind: verdictUnfinished, release: true}
	case end.cancelled && (errors.Is(end.cause, errReplaced) || errors.Is(end.cause, leasing.ErrLeaseLost)):
		return verdict{kind: verdictCancelled, reason: reasonCancelled}
	case errors.Is(end.cause, errReplaced),
		end.replaced && errors.Is(end.cause, leasing.ErrLeaseLost):
		return verdict{kind: verdictCancelled, reason: reasonReplaced}
	}

	v := verdict{
		failure: target.Classify(end.err, target.CodeConnection),
		state:   sundialv1.RunState_RUN_STATE_FAILED,
	}
	switch {
	case errors.Is(end.cause, errTimeout):
		v.failure = &target.Error{Code: target.CodeTimeout, Message: fmt.Sprintf("attempt exceeded the job's timeout of %s", end.timeout), Retryable: true}
		v.state = sundialv1.RunState_RUN_STATE_TIMED_OUT
	case errors.Is(end.cause, leasing.ErrLeaseLost):
		v.failure = &target.Error{Code: codeLeaseLost, Message: end.cause.Error(), Retryable: true}
		v.leaseLost = true
	}
	f := v.failure
	d := rs.policy.Decide(rs.attempt, retry.Failure{Code: f.Code, Retryable: f.Retryable, RetryAfter: f.RetryAfter}, rs.jitter)
	if !d.Retry {
		v.kind, v.reason = verdictDead, d.Reason
		return v
	}
	v.kind, v.delay = verdictRetry, d.Delay
	return v
}

// budgetAttempt is the attempt the retry policy counts: the run's attempt,
// less the attempts made before a dead-letter replay, so that a replay has
// the job's whole retry budget while its attempt numbers go on after the
// dead run's.
func budgetAttempt(run *sundialv1.Run) int {
	a, before := run.GetAttempt(), run.GetAttemptsBeforeReplay()
	if before >= a {
		return 1
	}
	return int(a - before)
}

// leaseAction is what becomes of the lease once a verdict is reached.
type leaseAction int

const (
	// leaseHandOver: the finishing goroutine of a success takes the
	// Keeper, which renews the lease until the dedupe mark is set.
	leaseHandOver leaseAction = iota
	// leaseReleaseNow: the Keeper stops and the lease is given back
	// before the run is settled.
	leaseReleaseNow
	// leaseReleaseAfter: the Keeper stops; the lease is given back once
	// the next attempt or the dead letter is written.
	leaseReleaseAfter
	// leaseAbandon: the Keeper stops and the lease is left to expire, as
	// a crashed runner's would be.
	leaseAbandon
)

// leaseAfter decides what becomes of the lease after verdict v. It does no
// I/O; settlement.conclude carries it out before it settles the run.
func leaseAfter(v verdict) leaseAction {
	switch v.kind {
	case verdictSucceeded:
		return leaseHandOver
	case verdictDefer, verdictCancelled:
		return leaseReleaseNow
	case verdictUnfinished:
		if v.release {
			return leaseReleaseNow
		}
		return leaseAbandon
	}
	return leaseReleaseAfter // retry and dead
}

// acquireStep is what follows one answer to a lease acquire.
type acquireStep int

const (
	// stepSettled: the acquire is over; its acquireOutcome says how.
	stepSettled acquireStep = iota
	// stepWaitHolder: another holder has the same run (a redelivery while
	// the first delivery executes): wait Config.HeldRetry and ask again.
	stepWaitHolder
	// stepWaitSlot: the job's slots are full and its policy neither
	// skips, queues nor replaces: wait Config.HeldRetry and ask again.
	stepWaitSlot
	// stepReplace: the job's slots are full under REPLACE: signal (then
	// revoke) the oldest holder and ask again shortly.
	stepReplace
	// stepRetry: Redis did not answer: back off and ask again.
	stepRetry
)

// decideAcquire decides what follows an acquire that answered err, under
// the job's effective overlap policy pol (policy); ctxDone says whether the
// delivery's context has ended. label is the lease metric's result to count
// ("" for none). It does no I/O; execution.acquire carries it out. The order
// matters: a run cancelled or replaced before this delivery ends CANCELLED
// whatever the policy, and a context that ended is no invalid run.
func decideAcquire(err error, pol sundialv1.OverlapPolicy, ctxDone bool) (step acquireStep, out acquireOutcome, label string) {
	switch {
	case err == nil:
		return stepSettled, acquireOutcome{res: acquired}, ""
	case errors.Is(err, leasing.ErrAlreadyDone):
		return stepSettled, acquireOutcome{res: alreadyDone}, leaseAlreadyDone
	case errors.Is(err, leasing.ErrRunHeld):
		return stepWaitHolder, acquireOutcome{}, leaseHeld
	case errors.Is(err, leasing.ErrNoSlot):
		var ns *leasing.NoSlotError
		if errors.As(err, &ns) {
			if reason, ended := endedBefore(ns.Flagged); ended {
				return stepSettled, acquireOutcome{res: endedCancelled, reason: reason}, leaseNoSlot
			}
		}
		switch pol {
		case sundialv1.OverlapPolicy_OVERLAP_POLICY_FORBID:
			return stepSettled, acquireOutcome{res: forbidden}, leaseNoSlot
		case sundialv1.OverlapPolicy_OVERLAP_POLICY_QUEUE:
			return stepSettled, acquireOutcome{res: queued}, leaseNoSlot
		case sundialv1.OverlapPolicy_OVERLAP_POLICY_REPLACE:
			return stepReplace, acquireOutcome{}, leaseNoSlot
		}
		return stepWaitSlot, acquireOutcome{}, leaseNoSlot
	case ctxDone:
		return stepSettled, acquireOutcome{res: aborted, err: err}, ""
	case leasing.IsRetryable(err):
		return stepRetry, acquireOutcome{}, leaseError
	}
	return stepSettled, acquireOutcome{res: invalidRun, err: err}, leaseError
}

// replaceAction is what a delivery under REPLACE does next to the holder of
// its job's slot.
type replaceAction int

const (
	// replaceSignal: ask the holder to stop (its first time).
	replaceSignal replaceAction = iota
	// replaceRevoke: the holder did not stop within the grace period:
	// revoke its lease.
	replaceRevoke
	// replaceWait: the holder was signalled (or revoked) already: wait
	// for its slot.
	replaceWait
)

// decideReplace decides what follows for a holder signalled at at (when
// signalled), and revoked or not, at now with the grace period grace. It does
// no I/O; execution.replace carries it out.
func decideReplace(at time.Time, signalled, revoked bool, now time.Time, grace time.Duration) replaceAction {
	switch {
	case !signalled:
		return replaceSignal
	case !revoked && now.Sub(at) >= grace:
		return replaceRevoke
	}
	return replaceWait
}

// preStep is what a delivery does once it holds the lease, before it
// executes.
type preStep int

const (
	// startAttempt: execute the run.
	startAttempt preStep = iota
	// endCancelled: the run was cancelled or replaced before this
	// delivery: it ends CANCELLED without executing (endedBefore).
	endCancelled
	// suspendAgain: an operator asked to suspend the run, and its last
	// delivery's runner died before SUSPENDED was out: suspend it again.
	suspendAgain
)

// beforeAttempt decides what a delivery that took the lease does before it
// executes, from the markers its acquire found (leasing.Lease.Flagged),
// and returns the reason of the CANCELLED for endCancelled. A cancel or a
// replace wins over a suspension. It does no I/O.
func beforeAttempt(flags []bool) (preStep, string) {
	if reason, ended := endedBefore(flags); ended {
		return endCancelled, reason
	}
	if flagged(flags, flagSuspend) {
		return suspendAgain, ""
	}
	return startAttempt, ""
}
