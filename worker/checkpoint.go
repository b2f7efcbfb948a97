package worker

import (
	"context"
	"errors"

	"github.com/sundialhq/sundial/checkpoint"
)

// ErrSuspended is returned by Checkpoint once an operator has suspended
// the run: the checkpoint was stored, and the handler should return (any
// error will do; ctx is cancelled with this cause too). The run becomes
// SUSPENDED, and a resume executes it again with LastCheckpoint returning
// the checkpoint just saved.
var ErrSuspended = checkpoint.ErrSuspended

// MaxCheckpointSize is the largest checkpoint a handler may save.
const MaxCheckpointSize = checkpoint.MaxSize

// errNoCheckpoints is returned outside an attempt of a runner with a
// checkpoint store.
var errNoCheckpoints = errors.New("worker: no checkpoint store on this attempt's runner")

// Checkpoint saves data as the run's latest checkpoint, durably, tied to
// the run id and this attempt. It returns ErrSuspended when the run is to
// stop here, an error wrapping checkpoint.ErrStale when the attempt lost
// its lease to another (it must stop: its checkpoints are refused), and a
// *checkpoint.TooLargeError above MaxCheckpointSize.
func Checkpoint(ctx context.Context, data []byte) error {
	if b, ok := ctx.Value(remoteKey{}).(*beater); ok {
		return b.save(ctx, data)
	}
	s := checkpoint.FromContext(ctx)
	if s == nil {
		return errNoCheckpoints
	}
	return s.Save(ctx, data)
}

// LastCheckpoint returns the run's latest checkpoint, saved by this
// attempt or an earlier one (an attempt that failed, a run suspended and
// resumed, a runner that died); ok is false when the run has none.
func LastCheckpoint(ctx context.Context) (data []byte, ok bool, err error) {
	if b, isRemote := ctx.Value(remoteKey{}).(*beater); isRemote {
		data, ok := b.lastCheckpoint()
		return data, ok, nil
	}
	s := checkpoint.FromContext(ctx)
	if s == nil {
		return nil, false, errNoCheckpoints
	}
	c, ok, err := s.Last(ctx)
	return c.Data, ok, err
}
