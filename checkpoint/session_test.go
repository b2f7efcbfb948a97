package checkpoint_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/checkpoint"
)

// memStore is a checkpoint.Store of one process, fenced as the contract
// says.
type memStore struct {
	mu    sync.Mutex
	cps   map[string]checkpoint.Checkpoint
	saves int
}

func (m *memStore) SaveCheckpoint(_ context.Context, c checkpoint.Checkpoint) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := c.Validate(); err != nil {
		return err
	}
	if cur, ok := m.cps[c.RunID]; ok && cur.FencingToken > c.FencingToken {
		return checkpoint.ErrStale
	}
	m.cps[c.RunID] = c
	m.saves++
	return nil
}

func (m *memStore) LoadCheckpoint(_ context.Context, runID string) (checkpoint.Checkpoint, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.cps[runID]
	return c, ok, nil
}

func (m *memStore) MarkSuspended(context.Context, checkpoint.Suspension, int64) error {
	return errors.New("not used")
}

func (m *memStore) Suspended(context.Context, string) (checkpoint.Suspension, bool, error) {
	return checkpoint.Suspension{}, false, errors.New("not used")
}

func (m *memStore) ClearSuspended(context.Context, checkpoint.Suspension) error {
	return errors.New("not used")
}

func TestSessionSavesInSequenceAndStopsOnSuspend(t *testing.T) {
	t.Parallel()
	st := &memStore{cps: map[string]checkpoint.Checkpoint{
		"r": {RunID: "r", Seq: 4, Attempt: 1, FencingToken: 3, Data: []byte("old")},
	}}
	now := func() time.Time { return time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC) }
	suspend, suspendedCalls := false, 0
	s := checkpoint.NewSession(checkpoint.SessionConfig{Store: st, RunID: "r", Attempt: 2, FencingToken: 8, Now: now,
		SuspendRequested: func(context.Context) bool { return suspend },
		OnSuspend:        func() { suspendedCalls++ }})
	ctx := checkpoint.NewContext(t.Context(), s)
	require.Same(t, s, checkpoint.FromContext(ctx))
	assert.Nil(t, checkpoint.FromContext(t.Context()))

	last, ok, err := s.Last(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "old", string(last.Data), "an earlier attempt's checkpoint")

	require.NoError(t, s.Save(ctx, []byte("five")))
	last, _, _ = s.Last(ctx)
	assert.Equal(t, int64(5), last.Seq, "the sequence goes on from the stored one")
	assert.Equal(t, uint32(2), last.Attempt)

	var tooLarge *checkpoint.TooLargeError
	require.ErrorAs(t, s.Save(ctx, make([]byte, checkpoint.MaxSize+1)), &tooLarge)
	assert.ErrorContains(t, tooLarge, "65537 bytes exceeds the limit of 65536 bytes")

	suspend = true
	require.ErrorIs(t, s.Save(ctx, []byte("six")), checkpoint.ErrSuspended)
	assert.True(t, s.Suspended())
	assert.Equal(t, 1, suspendedCalls)
	require.ErrorIs(t, s.Save(ctx, []byte("seven")), checkpoint.ErrSuspended)
	assert.Equal(t, 1, suspendedCalls, "the attempt is cancelled once")
	assert.Equal(t, "six", string(st.cps["r"].Data), "the suspending save is stored; later ones are not")
	assert.Equal(t, 2, st.saves)

	stale := checkpoint.NewSession(checkpoint.SessionConfig{Store: st, RunID: "r", Attempt: 1, FencingToken: 3, Now: now})
	require.ErrorIs(t, stale.Save(ctx, []byte("late")), checkpoint.ErrStale, "an attempt whose lease was taken over")
}
