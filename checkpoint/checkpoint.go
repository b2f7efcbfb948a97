package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// MaxSize is the largest checkpoint blob: a checkpoint is a position to
// resume from, not the attempt's data.
const MaxSize = 64 << 10

// ErrSuspended is returned by a save once an operator has asked to suspend
// the run: the checkpoint was stored, and the handler should return (the
// attempt's context is cancelled with this cause as well).
var ErrSuspended = errors.New("checkpoint: the run is suspended")

// ErrStale is returned by a save made under a lease older than the one
// that saved the stored checkpoint: another attempt has taken the run over.
var ErrStale = errors.New("checkpoint: a newer lease holds the run")

// ErrNotSuspended is returned by Resume for a run that is not suspended.
var ErrNotSuspended = errors.New("checkpoint: the run is not suspended")

// TooLargeError is returned for a blob above MaxSize.
type TooLargeError struct{ Size int }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("checkpoint: blob of %d bytes exceeds the limit of %d bytes", e.Size, MaxSize)
}

// Checkpoint is the latest checkpoint of a run.
type Checkpoint struct {
	RunID string
	// Seq is 1 for the run's first checkpoint and grows by one per save.
	Seq int64
	// Attempt and FencingToken are those of the attempt that saved it.
	Attempt      uint32
	FencingToken int64
	Data         []byte
	SavedAt      time.Time
}

// Validate reports every bad field.
func (c Checkpoint) Validate() error {
	var errs []error
	if c.RunID == "" {
		errs = append(errs, errors.New("checkpoint: RunID: is empty"))
	}
	if c.Seq < 1 {
		errs = append(errs, fmt.Errorf("checkpoint: Seq: %d is below 1", c.Seq))
	}
	if c.FencingToken < 1 {
		errs = append(errs, fmt.Errorf("checkpoint: FencingToken: %d is below 1", c.FencingToken))
	}
	if len(c.Data) > MaxSize {
		errs = append(errs, &TooLargeError{Size: len(c.Data)})
	}
	return errors.Join(errs...)
}

// Suspension is a suspended run as stored: the run as it was delivered
// (an encoded sundial.v1.Run), its job, and the fencing token of the
// attempt that suspended it.
type Suspension struct {
	RunID, JobID string
	Run          []byte
	FencingToken int64
}

// Store keeps checkpoints durably. The Cassandra store implements it.
type Store interface {
	// SaveCheckpoint stores c as the run's latest checkpoint unless the
	// stored one was saved under a newer fencing token (ErrStale).
	SaveCheckpoint(ctx context.Context, c Checkpoint) error
	// LoadCheckpoint returns the run's latest checkpoint; ok is false when
	// the run has none.
	LoadCheckpoint(ctx context.Context, runID string) (c Checkpoint, ok bool, err error)
	// MarkSuspended records the run as suspended, fenced by token like a
	// save.
	MarkSuspended(ctx context.Context, s Suspension, token int64) error
	// Suspended returns the suspension of runID; ok is false when the
	// run is not suspended.
	Suspended(ctx context.Context, runID string) (s Suspension, ok bool, err error)
	// ClearSuspended clears the suspension s, unless the run was
	// suspended again since (under a newer token) or already resumed
	// (ErrNotSuspended).
	ClearSuspended(ctx context.Context, s Suspension) error
}
