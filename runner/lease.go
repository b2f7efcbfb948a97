package runner

import (
	"context"
	"errors"
	"time"

	"github.com/sundialhq/sundial/internal/backoff"
	"github.com/sundialhq/sundial/leasing"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

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

// acquire takes the run's lease, applying the overlap policy when the job's
// slots are full. It waits while another holder has the same run, and
// retries while Redis is unreachable, until ctx ends.
func (x *execution) acquire(ctx context.Context) (leasing.Lease, acquireOutcome) {
	r, run := x.r, x.run
	limit, pol := policy(run)
	// The cancel, replace and suspend markers are read by the acquire
	// itself: no round trip of their own for every run.
	req := leasing.Request{JobID: run.GetJobId(), RunID: run.GetRunId(), Limit: limit,
		Flags: []string{cancelledKey(r.cfg.KeyPrefix, run.GetJobId(), run.GetRunId()), replacedKey(r.cfg.KeyPrefix, run.GetJobId(), run.GetRunId())}}
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
			if x.debugOn(ctx) {
				x.logger().Debug("run is leased by another holder; waiting", "retry_in", wait)
			}
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

// replace asks the execution of holder to stop, as decideReplace says:
// first by signal, then, after the grace period, by revoking its lease.
func (x *execution) replace(ctx context.Context, holder string, signalled map[string]time.Time, revoked map[string]bool) {
	r, run := x.r, x.run
	now := r.cfg.Now()
	at, ok := signalled[holder]
	switch decideReplace(at, ok, revoked[holder], now, r.cfg.ReplaceGrace) {
	case replaceSignal:
		signalled[holder] = now
		if err := r.cancels.signal(ctx, run.GetJobId(), holder); err != nil {
			x.logger().Warn("replace signal failed", "holder", holder, "err", err)
		}
		x.logger().Info("replacing the running execution of the job", "holder", holder)
	case replaceRevoke:
		revoked[holder] = true
		if _, err := r.cfg.Leases.Revoke(ctx, run.GetJobId(), holder); err != nil {
			x.logger().Warn("revoke failed", "holder", holder, "err", err)
		}
		x.logger().Info("holder did not stop on the signal; lease revoked", "holder", holder)
	case replaceWait:
	}
}

// leaseTaken records a lease taken for the run and returns the trigger
// latency: from the attempt's due time to now.
func (x *execution) leaseTaken(lease leasing.Lease) time.Duration {
	r := x.r
	latency := r.cfg.Now().Sub(attemptDue(x.run))
	r.m.observeTriggerLatency(x.run, latency)
	r.m.leases.WithLabelValues(leaseAcquired).Inc()
	x.ev.token = lease.Token
	return latency
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
