package cassandra_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/checkpoint"
)

// TestCheckpointsAreFenced: a save under an older fencing token than the
// stored one is refused and changes nothing; so is a suspension.
func TestCheckpointsAreFenced(t *testing.T) {
	t.Parallel()
	_, s := setup(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	at := time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC)
	cp := func(seq, token int64, data string) checkpoint.Checkpoint {
		return checkpoint.Checkpoint{RunID: "j@1", Seq: seq, Attempt: 1, FencingToken: token, Data: []byte(data), SavedAt: at}
	}

	_, ok, err := s.LoadCheckpoint(ctx, "j@1")
	require.NoError(t, err)
	assert.False(t, ok, "no checkpoint yet")

	require.NoError(t, s.SaveCheckpoint(ctx, cp(1, 5, "one")))
	require.ErrorIs(t, s.SaveCheckpoint(ctx, cp(2, 4, "stale")), checkpoint.ErrStale, "an older lease")
	require.NoError(t, s.SaveCheckpoint(ctx, cp(2, 5, "two")), "the same lease saves again")
	require.NoError(t, s.SaveCheckpoint(ctx, cp(3, 7, "three")), "a newer lease")
	require.ErrorIs(t, s.SaveCheckpoint(ctx, cp(4, 5, "late")), checkpoint.ErrStale, "the lease that lost the run")
	got, ok, err := s.LoadCheckpoint(ctx, "j@1")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, cp(3, 7, "three"), got)

	var tooLarge *checkpoint.TooLargeError
	require.ErrorAs(t, s.SaveCheckpoint(ctx, cp(4, 7, string(bytes.Repeat([]byte("x"), checkpoint.MaxSize+1)))), &tooLarge)
	assert.Equal(t, checkpoint.MaxSize+1, tooLarge.Size)

	sp := checkpoint.Suspension{RunID: "j@1", JobID: "j", Run: []byte("run")}
	require.ErrorIs(t, s.MarkSuspended(ctx, sp, 6), checkpoint.ErrStale)
	_, ok, err = s.Suspended(ctx, "j@1")
	require.NoError(t, err)
	assert.False(t, ok, "a refused suspension leaves none")
	require.NoError(t, s.MarkSuspended(ctx, sp, 7))
	stored, ok, err := s.Suspended(ctx, "j@1")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, checkpoint.Suspension{RunID: "j@1", JobID: "j", Run: []byte("run"), FencingToken: 7}, stored)
	got, _, err = s.LoadCheckpoint(ctx, "j@1")
	require.NoError(t, err)
	assert.Equal(t, cp(3, 7, "three"), got, "a suspension keeps the checkpoint")

	require.ErrorIs(t, s.ClearSuspended(ctx, checkpoint.Suspension{RunID: "j@1", FencingToken: 6}), checkpoint.ErrNotSuspended,
		"a clear of an older suspension")
	require.NoError(t, s.ClearSuspended(ctx, stored))
	require.ErrorIs(t, s.ClearSuspended(ctx, stored), checkpoint.ErrNotSuspended, "a second clear")
	_, ok, err = s.Suspended(ctx, "j@1")
	require.NoError(t, err)
	assert.False(t, ok)

	// A run suspended before its first checkpoint has a suspension and no
	// checkpoint.
	require.NoError(t, s.MarkSuspended(ctx, checkpoint.Suspension{RunID: "j@2", JobID: "j", Run: []byte("run")}, 9))
	_, ok, err = s.LoadCheckpoint(ctx, "j@2")
	require.NoError(t, err)
	assert.False(t, ok)
	_, ok, err = s.Suspended(ctx, "j@2")
	require.NoError(t, err)
	assert.True(t, ok)
}
