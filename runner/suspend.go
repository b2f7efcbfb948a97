package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/checkpoint"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// reasonSuspended is the reason of the SUSPENDED event of a run an
// operator suspended.
const reasonSuspended = "suspended"

// Suspension. SignalSuspend sets the marker key <prefix>{job}:suspend:<run>.
// The runner executing the run asks for the marker after each checkpoint
// its handler stores: once it exists, the save returns
// checkpoint.ErrSuspended and the attempt's context is cancelled with that
// cause. When the handler has returned, the runner marks the run suspended
// in the checkpoint store (with the run, for the resume), releases the
// lease without a dedupe mark, emits SUSPENDED and commits the record. A
// runner that finds the marker when it takes the lease of a run (the
// redelivery of a run whose runner died after the checkpoint) suspends it
// at once without executing it; the lease's acquire script reads the
// marker (leasing.Request.Flags), so runs cost no extra round trip for it. The marker lives until the resume deletes
// it (ClearSuspend), or suspendMarkerTTL.

func suspendKey(keyPrefix, jobID, runID string) string {
	return keyPrefix + "{" + jobID + "}:suspend:" + runID
}

// suspendMarkerTTL bounds the life of a marker of a run that never
// checkpoints again (it ends otherwise, or is never resumed).
const suspendMarkerTTL = 7 * 24 * time.Hour

// SignalSuspend asks the runner executing runID of jobID to suspend it
// after its next checkpoint. keyPrefix is the runners' Config.KeyPrefix.
func SignalSuspend(ctx context.Context, rdb redis.UniversalClient, keyPrefix, jobID, runID string) error {
	if err := rdb.Set(ctx, suspendKey(keyPrefix, jobID, runID), "operator", suspendMarkerTTL).Err(); err != nil {
		return fmt.Errorf("mark run %s of job %q to suspend: %w", runID, jobID, err)
	}
	return nil
}

// ClearSuspend deletes the suspend marker of runID, so the run resumed
// executes rather than being suspended again.
func ClearSuspend(ctx context.Context, rdb redis.UniversalClient, keyPrefix, jobID, runID string) error {
	if err := rdb.Del(ctx, suspendKey(keyPrefix, jobID, runID)).Err(); err != nil {
		return fmt.Errorf("clear the suspend marker of run %s of job %q: %w", runID, jobID, err)
	}
	return nil
}

// suspendRequested reports whether an operator asked to suspend runID. An
// unreachable Redis reads as no: the run goes on, and is suspended at a
// later checkpoint.
func (r *markers) suspendRequested(ctx context.Context, jobID, runID string) bool {
	n, err := r.cfg.Redis.Exists(ctx, suspendKey(r.cfg.KeyPrefix, jobID, runID)).Result()
	return err == nil && n > 0
}

// ResumeConfig is what Resume needs.
type ResumeConfig struct {
	// Checkpoints keeps the suspended runs.
	Checkpoints checkpoint.Store
	// Enqueuer writes the resumed run's due entry.
	Enqueuer Enqueuer
	// Redis and KeyPrefix (the runners' Config.KeyPrefix) find the
	// suspend marker.
	Redis     redis.UniversalClient
	KeyPrefix string
	// Now is the clock of the due entry.
	Now func() time.Time
}

// Resume dispatches the suspended run runID again, under the same run id
// and attempt: its suspend marker is deleted, a due entry carrying the run
// is enqueued for now, and the suspension is cleared. It returns the run's
// job id, or an error wrapping checkpoint.ErrNotSuspended.
//
// The entry is enqueued before the suspension is cleared, so a failure in
// between leaves a run that a second Resume dispatches again; two
// deliveries of one run id execute one at a time (the lease is per run),
// and the second finds the run done.
func Resume(ctx context.Context, c ResumeConfig, runID string) (string, error) {
	sp, ok, err := c.Checkpoints.Suspended(ctx, runID)
	if err != nil {
		return "", fmt.Errorf("resume run %s: %w", runID, err)
	}
	if !ok {
		return "", fmt.Errorf("resume run %s: %w", runID, checkpoint.ErrNotSuspended)
	}
	run := &sundialv1.Run{}
	if err := proto.Unmarshal(sp.Run, run); err != nil {
		return "", fmt.Errorf("resume run %s: the stored run does not decode: %w", runID, err)
	}
	if err := ClearSuspend(ctx, c.Redis, c.KeyPrefix, sp.JobID, runID); err != nil {
		return "", fmt.Errorf("resume run %s: %w", runID, err)
	}
	due := store.Truncate(c.Now())
	run.AttemptDueTime = timestamppb.New(due)
	run.DispatchedAt = nil
	payload, err := proto.Marshal(run)
	if err != nil {
		return "", fmt.Errorf("resume run %s: encode the run: %w", runID, err)
	}
	entry := store.DueEntry{Due: due, JobID: sp.JobID, Kind: store.KindRetry, RunID: runID,
		Attempt: int(run.GetAttempt()), Revision: max(run.GetDefinitionOffset(), 0), Payload: payload}
	if err := c.Enqueuer.Enqueue(ctx, entry); err != nil {
		return "", fmt.Errorf("resume run %s: enqueue: %w", runID, err)
	}
	// A duplicate delivery of the run that found the marker before it was
	// deleted suspends the run again under a newer token: that suspension
	// is cleared too, since the entry just enqueued executes the run.
	for range clearAttempts {
		err := c.Checkpoints.ClearSuspended(ctx, sp)
		if err == nil {
			break
		}
		if !errors.Is(err, checkpoint.ErrNotSuspended) {
			return "", fmt.Errorf("resume run %s: the run is dispatched, but: %w", runID, err)
		}
		cur, ok, err := c.Checkpoints.Suspended(ctx, runID)
		if err != nil {
			return "", fmt.Errorf("resume run %s: the run is dispatched, but: %w", runID, err)
		}
		if !ok {
			break // another resume cleared it
		}
		sp = cur
	}
	return sp.JobID, nil
}

// clearAttempts bounds Resume's clearing of suspensions that duplicate
// deliveries recorded meanwhile.
const clearAttempts = 3
