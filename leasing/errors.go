package leasing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
)

var (
	// ErrAlreadyDone means the run's dedupe mark exists: its effect already
	// happened and it must not be executed again.
	ErrAlreadyDone = errors.New("leasing: run already done")

	// ErrRunHeld means the run already holds a slot under another acquire (a
	// redelivery while the first delivery still executes, or a revoked holder
	// whose slot has not expired yet). Try again later; do not execute now.
	ErrRunHeld = errors.New("leasing: run already leased by another holder")

	// ErrNoSlot means every concurrency slot of the job is taken. The error is
	// a *NoSlotError carrying the holders; errors.Is(err, ErrNoSlot) matches.
	ErrNoSlot = errors.New("leasing: no free concurrency slot")

	// ErrLeaseLost means the caller no longer holds the lease: it expired, it
	// was revoked, or its token is not the holder's.
	ErrLeaseLost = errors.New("leasing: lease lost")
)

// NoSlotError is returned by Acquire when the job's concurrency limit is
// reached. Holders lets the caller apply its overlap policy, e.g. revoke them
// to replace the running executions.
type NoSlotError struct {
	JobID string
	Limit int
	// Holders are the run ids that hold the job's slots, in expiry order.
	Holders []string
	// Flagged says, for each of the request's Flags in order, whether the
	// key existed (read in the same script), as Lease.Flagged does for an
	// acquire that took the lease.
	Flagged []bool
}

func (e *NoSlotError) Error() string {
	return fmt.Sprintf("leasing: job %s: all %d concurrency slots taken by %s", e.JobID, e.Limit, strings.Join(e.Holders, ", "))
}

// Is makes errors.Is(err, ErrNoSlot) true.
func (e *NoSlotError) Is(target error) bool { return target == ErrNoSlot }

// IsRetryable reports whether err is a transient failure to reach Redis or a
// transient refusal by it, so that the same call may be made again.
//
// Every call of this package is safe to repeat after such an error, even when
// the first one took effect and only its reply was lost: Acquire recognises
// its own retry by a nonce, Complete recognises its own done mark, Renew only
// extends, Release of a freed slot reports ErrLeaseLost. The answers of the
// leases themselves (ErrAlreadyDone, ErrNoSlot, ErrRunHeld, ErrLeaseLost) are
// not retryable: they are decisions.
func IsRetryable(err error) bool {
	switch {
	case err == nil,
		errors.Is(err, ErrAlreadyDone), errors.Is(err, ErrNoSlot),
		errors.Is(err, ErrRunHeld), errors.Is(err, ErrLeaseLost),
		errors.Is(err, redis.ErrClosed):
		return false
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return true // never connected, whatever the context says
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false // the caller gave up; retrying under the same context is pointless
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, redis.ErrPoolTimeout) ||
		errors.Is(err, redis.ErrPoolExhausted) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	return redis.IsLoadingError(err) || redis.IsReadOnlyError(err) ||
		redis.IsMasterDownError(err) || redis.IsClusterDownError(err) ||
		redis.IsTryAgainError(err) || redis.IsMaxClientsError(err) ||
		isRedirect(err) || isNoScript(err)
}

// isRedirect reports a Redis Cluster MOVED or ASK reply: the node did not
// run the command because another one serves its slot. A cluster client
// follows these itself; one that reaches the caller means the slot map kept
// changing under the client's redirects, as during a failover.
func isRedirect(err error) bool {
	_, moved := redis.IsMovedError(err)
	_, ask := redis.IsAskError(err)
	return moved || ask
}

func isNoScript(err error) bool {
	return errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT")
}
