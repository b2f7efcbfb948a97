package leasing

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Holding reports whether runID holds a live lease of one of jobID's slots:
// the slot is recorded with an expiry after the Redis server's clock (TIME)
// and the holder has not been revoked. It is a read, for operators asking
// whether a run is executing; a runner never decides anything on it.
func (s *Store) Holding(ctx context.Context, jobID, runID string) (bool, error) {
	if err := validateJobID(jobID); err != nil {
		return false, fmt.Errorf("leasing: holding: %w", err)
	}
	pipe := s.cfg.Client.Pipeline()
	now := pipe.Time(ctx)
	expiry := pipe.ZScore(ctx, s.slotsKey(jobID), runID)
	holder := pipe.HExists(ctx, s.holdersKey(jobID), runID)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return false, fmt.Errorf("leasing: holding job %s run %s: %w", jobID, runID, err)
	}
	at, err := expiry.Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("leasing: holding job %s run %s: %w", jobID, runID, err)
	}
	return holder.Val() && int64(at) > now.Val().UnixMilli(), nil
}

// Done reports whether runID's dedupe mark exists: its effect happened and
// Acquire refuses it (ErrAlreadyDone). A read, for operators.
func (s *Store) Done(ctx context.Context, jobID, runID string) (bool, error) {
	if err := validateJobID(jobID); err != nil {
		return false, fmt.Errorf("leasing: done: %w", err)
	}
	n, err := s.cfg.Client.Exists(ctx, s.doneKey(jobID, runID)).Result()
	if err != nil {
		return false, fmt.Errorf("leasing: done job %s run %s: %w", jobID, runID, err)
	}
	return n > 0, nil
}
