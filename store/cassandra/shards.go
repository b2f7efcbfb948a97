package cassandra

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gocql/gocql"

	"github.com/sundialhq/sundial/store"
)

// noWatermark is what a shard's watermark holds before the first advance.
// The conditional advance compares against it (`watermark < ?`), and a
// comparison with null would never hold.
var noWatermark = time.UnixMilli(0).UTC()

// GetShard implements store.Shards with a serial read, so a claimant that
// lost a race sees the winner's epoch.
func (s *Store) GetShard(ctx context.Context, shard int) (store.ShardState, error) {
	if err := s.checkShard(ctx, shard); err != nil {
		return store.ShardState{}, fmt.Errorf("get shard: %w", err)
	}
	st, err := s.getShard(ctx, shard)
	if err != nil {
		return store.ShardState{}, fmt.Errorf("get shard %d: %w", shard, err)
	}
	return st, nil
}

func (s *Store) getShard(ctx context.Context, shard int) (store.ShardState, error) {
	st := store.ShardState{Shard: shard}
	err := s.serialRead(ctx, s.q.selectShard, shard).Scan(&st.Epoch, &st.Owner, &st.Watermark, &st.ClaimedAt)
	if errors.Is(err, gocql.ErrNotFound) {
		return store.ShardState{Shard: shard}, nil
	}
	if err != nil {
		return store.ShardState{}, err
	}
	st.Watermark = fromDB(st.Watermark)
	st.ClaimedAt = fromDB(st.ClaimedAt)
	return st, nil
}

// ClaimShard implements store.Shards: `UPDATE ... SET epoch = seen+1 IF
// epoch = seen` (an insert IF NOT EXISTS for a shard never claimed). A
// transaction that times out is resolved by a serial read: the claim is ours
// if the epoch is seen+1 with us as owner.
func (s *Store) ClaimShard(ctx context.Context, shard int, owner string, seen int64) (int64, error) {
	if owner == "" {
		return 0, fmt.Errorf("claim shard %d: %w: owner: must not be empty", shard, store.ErrInvalid)
	}
	if seen < 0 {
		return 0, fmt.Errorf("claim shard %d: %w: seen epoch %d: must not be negative", shard, store.ErrInvalid, seen)
	}
	if err := s.checkShard(ctx, shard); err != nil {
		return 0, fmt.Errorf("claim shard: %w", err)
	}
	now := ms(s.cfg.Now())
	var q *gocql.Query
	if seen == 0 {
		q = s.query(ctx, s.q.insertShard, shard, owner, noWatermark, now)
	} else {
		q = s.query(ctx, s.q.claimShard, seen+1, owner, now, shard, seen)
	}
	current := map[string]any{}
	applied, err := q.MapScanCAS(current)
	switch {
	case err == nil && applied:
		return seen + 1, nil
	case err == nil:
		return 0, fmt.Errorf("claim shard %d at epoch %d (now %v): %w", shard, seen, current["epoch"], store.ErrEpochConflict)
	case !casUnknown(err):
		return 0, fmt.Errorf("claim shard %d: %w", shard, err)
	}
	st, rerr := s.getShard(ctx, shard)
	if rerr != nil {
		return 0, fmt.Errorf("claim shard %d: %w; reading it back: %w", shard, err, rerr)
	}
	if st.Epoch == seen+1 && st.Owner == owner {
		return st.Epoch, nil
	}
	// Only the conflict is for callers to branch on; the last write error is
	// context, and wrapping it could make a conflict look retryable.
	return 0, fmt.Errorf("claim shard %d at epoch %d (now %d, after %v): %w", shard, seen, st.Epoch, err, store.ErrEpochConflict) //nolint:errorlint // see above
}

// AdvanceWatermark implements store.Shards: `UPDATE ... SET watermark = t IF
// epoch = ours AND watermark < t`. When the condition fails the returned row
// says why: another epoch (ErrStaleEpoch) or a watermark already at or past
// t (nothing to do). Contended transactions are retried; advancing is
// idempotent.
func (s *Store) AdvanceWatermark(ctx context.Context, shard int, epoch int64, t time.Time) error {
	if t.IsZero() {
		return fmt.Errorf("advance watermark of shard %d: %w: time: must be set", shard, store.ErrInvalid)
	}
	if epoch < 1 {
		return fmt.Errorf("advance watermark of shard %d: %w: epoch %d: must be at least 1 (an epoch ClaimShard returned)", shard, store.ErrInvalid, epoch)
	}
	if err := s.checkShard(ctx, shard); err != nil {
		return fmt.Errorf("advance watermark: %w", err)
	}
	t = ms(t)
	var lastErr error
	b := contention()
	for range casAttempts {
		current := map[string]any{}
		applied, err := s.query(ctx, s.q.advanceWatermark, t, shard, epoch, t).MapScanCAS(current)
		if err == nil {
			if applied {
				return nil
			}
			have, _ := current["epoch"].(int64)
			if have != epoch {
				return fmt.Errorf("advance watermark of shard %d at epoch %d (now %d): %w", shard, epoch, have, store.ErrStaleEpoch)
			}
			return nil // the watermark is already at or past t
		}
		if !casUnknown(err) {
			return fmt.Errorf("advance watermark of shard %d: %w", shard, err)
		}
		lastErr = err
		if err := waitContended(ctx, b); err != nil {
			return fmt.Errorf("advance watermark of shard %d: %w (after %w)", shard, err, lastErr)
		}
	}
	return fmt.Errorf("advance watermark of shard %d: %d attempts timed out: %w", shard, casAttempts, lastErr)
}
