package store

import (
	"errors"
	"fmt"
)

// Sentinel errors callers branch on. Both implementations return them
// (wrapped with context), and the conformance suite checks that they do.
var (
	// ErrNotFound: no such job.
	ErrNotFound = errors.New("not found")
	// ErrNotInitialized: InitCluster has not been called, so the shard
	// count is unknown.
	ErrNotInitialized = errors.New("cluster not initialized: run sundial migrate")
	// ErrShardCountMismatch: InitCluster was called with a shard count other
	// than the stored one. The error is a *ShardCountError.
	ErrShardCountMismatch = errors.New("shard count differs from the cluster's")
	// ErrEpochConflict: a claim lost because the shard's epoch is no longer
	// the one the claimant saw. Re-read with GetShard and claim again.
	ErrEpochConflict = errors.New("shard epoch changed since it was read")
	// ErrStaleEpoch: the caller's epoch has been superseded by a newer
	// claim; the caller no longer owns the shard and must stop dispatching it.
	ErrStaleEpoch = errors.New("shard claimed by a newer epoch")
	// ErrInvalid: an argument is malformed; the message names the field.
	ErrInvalid = errors.New("invalid argument")
)

// ShardCountError reports an InitCluster whose shard count differs from the
// stored one.
type ShardCountError struct {
	Stored, Requested int
}

func (e *ShardCountError) Error() string {
	return fmt.Sprintf("cluster is initialised with %d shards, %d requested: the shard count cannot change", e.Stored, e.Requested)
}

// Unwrap makes errors.Is(err, ErrShardCountMismatch) hold.
func (e *ShardCountError) Unwrap() error { return ErrShardCountMismatch }

// CheckShard reports a shard number outside [0, shards).
func CheckShard(shard, shards int) error {
	if shard < 0 || shard >= shards {
		return fmt.Errorf("%w: shard %d: must be in [0, %d)", ErrInvalid, shard, shards)
	}
	return nil
}
