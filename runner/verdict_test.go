package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/sundialhq/sundial/leasing"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/breaker"
	"github.com/sundialhq/sundial/runner/retry"
	"github.com/sundialhq/sundial/runner/target"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	// Three attempts, backoff 1s doubling: with jitter 0.5 the retry after
	// attempt 1 is due in 500ms, after attempt 2 in 1s.
	policy := retry.Policy{MaxAttempts: 3, InitialBackoff: time.Second, MaxBackoff: time.Minute, Multiplier: 2,
		NonRetryable: []string{"bad_request"}}
	first := retryState{policy: policy, attempt: 1, jitter: 0.5}
	second := retryState{policy: policy, attempt: 2, jitter: 0.5}
	last := retryState{policy: policy, attempt: 3, jitter: 0.5}
	lost := fmt.Errorf("renew: %w", leasing.ErrLeaseLost)
	targetErr := errors.New("connection refused")
	open := &breaker.OpenError{Key: breaker.Key{Downstream: "api.example"}, RetryIn: 30 * time.Second, Err: errors.New("circuit breaker is open")}
	handler := &target.Error{Code: target.CodeHandler, Message: "boom", Retryable: true}
	tooMany := &target.Error{Code: "http_429", Message: "slow down", Retryable: true, RetryAfter: 10 * time.Second}
	badRequest := &target.Error{Code: "bad_request", Message: "no", Retryable: true}
	permanent := &target.Error{Code: target.CodeInvalidTarget, Message: "no url"}
	failedState := sundialv1.RunState_RUN_STATE_FAILED
	timedOutState := sundialv1.RunState_RUN_STATE_TIMED_OUT

	tests := []struct {
		name string
		end  attemptEnd
		rs   retryState
		want verdict
	}{
		{
			name: "success is final",
			end:  attemptEnd{},
			rs:   first,
			want: verdict{kind: verdictSucceeded},
		},
		{
			name: "success counts even when the context ended as the target answered",
			end:  attemptEnd{cause: lost},
			rs:   last,
			want: verdict{kind: verdictSucceeded},
		},
		{
			name: "an open breaker defers by its retry time, spending no attempt",
			end:  attemptEnd{err: open},
			rs:   last,
			want: verdict{kind: verdictDefer, delay: 30 * time.Second, reason: reasonCircuitOpen},
		},
		{
			name: "an open breaker defers even if the lease was lost meanwhile",
			end:  attemptEnd{err: fmt.Errorf("execute: %w", open), cause: lost},
			rs:   first,
			want: verdict{kind: verdictDefer, delay: 30 * time.Second, reason: reasonCircuitOpen},
		},
		{
			name: "a stopping runner gives the lease back and leaves the record unfinished",
			end:  attemptEnd{err: context.Canceled, cause: errShutdown},
			rs:   last,
			want: verdict{kind: verdictUnfinished, release: true},
		},
		{
			name: "a killed runner keeps the lease, as a crash would",
			end:  attemptEnd{err: context.Canceled, cause: errKilled},
			rs:   last,
			want: verdict{kind: verdictUnfinished},
		},
		{
			name: "a replace signal cancels the run for good",
			end:  attemptEnd{err: context.Canceled, cause: errReplaced},
			rs:   first,
			want: verdict{kind: verdictCancelled, reason: reasonReplaced},
		},
		{
			name: "an operator's cancel signal cancels the run for good, not as replaced",
			end:  attemptEnd{err: context.Canceled, cause: errReplaced, cancelled: true},
			rs:   first,
			want: verdict{kind: verdictCancelled, reason: reasonCancelled},
		},
		{
			name: "a lease lost after an operator's cancel is no failure",
			end:  attemptEnd{err: context.Canceled, cause: lost, cancelled: true},
			rs:   first,
			want: verdict{kind: verdictCancelled, reason: reasonCancelled},
		},
		{
			name: "a run that succeeded as it was cancelled succeeded",
			end:  attemptEnd{cause: errReplaced, cancelled: true},
			rs:   first,
			want: verdict{kind: verdictSucceeded},
		},
		{
			name: "a lease revoked by a replacing run cancels the run for good",
			end:  attemptEnd{err: context.Canceled, cause: lost, replaced: true},
			rs:   first,
			want: verdict{kind: verdictCancelled, reason: reasonReplaced},
		},
		{
			name: "a lease lost otherwise is a retryable failure",
			end:  attemptEnd{err: context.Canceled, cause: lost},
			rs:   first,
			want: verdict{kind: verdictRetry, delay: 500 * time.Millisecond, state: failedState, leaseLost: true,
				failure: &target.Error{Code: codeLeaseLost, Message: lost.Error(), Retryable: true}},
		},
		{
			name: "a lease lost on the last attempt is dead",
			end:  attemptEnd{err: context.Canceled, cause: lost},
			rs:   last,
			want: verdict{kind: verdictDead, reason: "attempts_exhausted", state: failedState, leaseLost: true,
				failure: &target.Error{Code: codeLeaseLost, Message: lost.Error(), Retryable: true}},
		},
		{
			name: "a timeout is TIMED_OUT and retryable",
			end:  attemptEnd{err: context.DeadlineExceeded, cause: errTimeout, timeout: 5 * time.Second},
			rs:   second,
			want: verdict{kind: verdictRetry, delay: time.Second, state: timedOutState,
				failure: &target.Error{Code: target.CodeTimeout, Message: "attempt exceeded the job's timeout of 5s", Retryable: true}},
		},
		{
			name: "a timeout on the last attempt is dead",
			end:  attemptEnd{err: context.DeadlineExceeded, cause: errTimeout, timeout: time.Minute},
			rs:   last,
			want: verdict{kind: verdictDead, reason: "attempts_exhausted", state: timedOutState,
				failure: &target.Error{Code: target.CodeTimeout, Message: "attempt exceeded the job's timeout of 1m0s", Retryable: true}},
		},
		{
			name: "a target error retries after the policy's backoff",
			end:  attemptEnd{err: handler},
			rs:   first,
			want: verdict{kind: verdictRetry, delay: 500 * time.Millisecond, state: failedState, failure: handler},
		},
		{
			name: "Retry-After is a lower bound of the backoff",
			end:  attemptEnd{err: fmt.Errorf("call: %w", tooMany)},
			rs:   first,
			want: verdict{kind: verdictRetry, delay: 10 * time.Second, state: failedState, failure: tooMany},
		},
		{
			name: "an error that is not a target error counts as a connection failure",
			end:  attemptEnd{err: targetErr},
			rs:   first,
			want: verdict{kind: verdictRetry, delay: 500 * time.Millisecond, state: failedState,
				failure: &target.Error{Code: target.CodeConnection, Message: targetErr.Error(), Retryable: true, Err: targetErr}},
		},
		{
			name: "a non-retryable error is dead at once",
			end:  attemptEnd{err: permanent},
			rs:   first,
			want: verdict{kind: verdictDead, reason: "non_retryable", state: failedState, failure: permanent},
		},
		{
			name: "a code the policy names non-retryable is dead at once",
			end:  attemptEnd{err: badRequest},
			rs:   first,
			want: verdict{kind: verdictDead, reason: "non_retryable_code", state: failedState, failure: badRequest},
		},
		{
			name: "the replace marker does not turn a plain failure into a cancellation",
			end:  attemptEnd{err: handler, replaced: true},
			rs:   first,
			want: verdict{kind: verdictRetry, delay: 500 * time.Millisecond, state: failedState, failure: handler},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, classify(tt.end, tt.rs))
		})
	}
}

// TestBudgetAttempt: a dead-letter replay goes on numbering attempts after
// the dead run's, and the retry policy counts from the replay.
func TestBudgetAttempt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name            string
		attempt, before uint32
		want            int
	}{
		{"first attempt", 1, 0, 1},
		{"a retry", 3, 0, 3},
		{"a replay after three attempts", 4, 3, 1},
		{"its retry", 5, 3, 2},
		{"inconsistent counts read as a first attempt", 2, 5, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, budgetAttempt(&sundialv1.Run{Attempt: tc.attempt, AttemptsBeforeReplay: tc.before}))
		})
	}
}

func TestLeaseAfter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		v    verdict
		want leaseAction
	}{
		{"success: the finishing goroutine renews until the dedupe mark", verdict{kind: verdictSucceeded}, leaseHandOver},
		{"deferred: released before the due entry", verdict{kind: verdictDefer}, leaseReleaseNow},
		{"cancelled: released at once", verdict{kind: verdictCancelled}, leaseReleaseNow},
		{"stopped: released", verdict{kind: verdictUnfinished, release: true}, leaseReleaseNow},
		{"killed: left to expire", verdict{kind: verdictUnfinished}, leaseAbandon},
		{"retry: released once the next attempt is stored", verdict{kind: verdictRetry}, leaseReleaseAfter},
		{"dead: released once the dead letter is written", verdict{kind: verdictDead}, leaseReleaseAfter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, leaseAfter(tt.v))
		})
	}
}

func TestDecideAcquire(t *testing.T) {
	t.Parallel()
	forbid := sundialv1.OverlapPolicy_OVERLAP_POLICY_FORBID
	queue := sundialv1.OverlapPolicy_OVERLAP_POLICY_QUEUE
	replace := sundialv1.OverlapPolicy_OVERLAP_POLICY_REPLACE
	allow := sundialv1.OverlapPolicy_OVERLAP_POLICY_ALLOW
	full := &leasing.NoSlotError{JobID: "j", Limit: 1, Holders: []string{"r0"}, Flagged: []bool{false, false}}
	cancelled := &leasing.NoSlotError{JobID: "j", Limit: 1, Holders: []string{"r0"}, Flagged: []bool{true, false}}
	replaced := &leasing.NoSlotError{JobID: "j", Limit: 1, Holders: []string{"r0"}, Flagged: []bool{false, true}}
	unreachable := &net.OpError{Op: "dial", Err: errors.New("connection refused")}
	invalid := errors.New("ERR job id is not a hash tag")

	tests := []struct {
		name      string
		err       error
		pol       sundialv1.OverlapPolicy
		ctxDone   bool
		wantStep  acquireStep
		wantRes   acquireResult
		wantWhy   string
		wantLabel string
	}{
		{"taken", nil, forbid, false, stepSettled, acquired, "", ""},
		{"already done: a duplicate", fmt.Errorf("acquire: %w", leasing.ErrAlreadyDone), forbid, false, stepSettled, alreadyDone, "", leaseAlreadyDone},
		{"held by another delivery: wait", leasing.ErrRunHeld, queue, false, stepWaitHolder, acquired, "", leaseHeld},
		{"full, forbid: skipped", full, forbid, false, stepSettled, forbidden, "", leaseNoSlot},
		{"full, queue: deferred", full, queue, false, stepSettled, queued, "", leaseNoSlot},
		{"full, replace: the holder is replaced", full, replace, false, stepReplace, acquired, "", leaseNoSlot},
		{"full, allow: wait", full, allow, false, stepWaitSlot, acquired, "", leaseNoSlot},
		{"full, cancelled before: ends cancelled whatever the policy", cancelled, replace, false, stepSettled, endedCancelled, reasonCancelled, leaseNoSlot},
		{"full, replaced before: ends cancelled, not replacing", replaced, replace, false, stepSettled, endedCancelled, reasonReplaced, leaseNoSlot},
		{"full without markers read", leasing.ErrNoSlot, queue, false, stepSettled, queued, "", leaseNoSlot},
		{"context ended: aborted, not invalid", context.Canceled, forbid, true, stepSettled, aborted, "", ""},
		{"Redis unreachable: retried", unreachable, forbid, false, stepRetry, acquired, "", leaseError},
		{"refused for good: an invalid run", invalid, forbid, false, stepSettled, invalidRun, "", leaseError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			step, out, label := decideAcquire(tt.err, tt.pol, tt.ctxDone)
			assert.Equal(t, tt.wantStep, step, "step")
			assert.Equal(t, tt.wantLabel, label, "label")
			if step != stepSettled {
				return
			}
			assert.Equal(t, tt.wantRes, out.res, "result")
			assert.Equal(t, tt.wantWhy, out.reason, "reason")
			if tt.wantRes == invalidRun || tt.wantRes == aborted {
				assert.Equal(t, tt.err, out.err)
			}
		})
	}
}

func TestBeforeAttempt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		flags      []bool
		want       preStep
		wantReason string
	}{
		{"no markers read: executed", nil, startAttempt, ""},
		{"no marker set: executed", []bool{false, false, false}, startAttempt, ""},
		{"cancelled before: not executed", []bool{true, false, false}, endCancelled, reasonCancelled},
		{"replaced before: not executed", []bool{false, true}, endCancelled, reasonReplaced},
		{"suspend asked: suspended again", []bool{false, false, true}, suspendAgain, ""},
		{"cancelled wins over suspended", []bool{true, false, true}, endCancelled, reasonCancelled},
		{"replaced wins over suspended", []bool{false, true, true}, endCancelled, reasonReplaced},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			step, reason := beforeAttempt(tt.flags)
			assert.Equal(t, tt.want, step, "step")
			assert.Equal(t, tt.wantReason, reason, "reason")
		})
	}
}

func TestDecideReplace(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	grace := 10 * time.Second
	tests := []struct {
		name               string
		signalled, revoked bool
		now                time.Time
		want               replaceAction
	}{
		{"first sight: signalled", false, false, at, replaceSignal},
		{"within the grace: waits", true, false, at.Add(grace - time.Millisecond), replaceWait},
		{"grace over: revoked", true, false, at.Add(grace), replaceRevoke},
		{"revoked already: waits for the slot", true, true, at.Add(time.Hour), replaceWait},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, decideReplace(at, tt.signalled, tt.revoked, tt.now, grace))
		})
	}
}
