package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/store"
)

// testHeldEntries: held entries are kept per job, listed in due order with
// every field, written idempotently and deleted by key; other jobs' entries
// are untouched.
func testHeldEntries(t *testing.T, s store.Store) {
	ctx := context.Background()
	retry := store.DueEntry{Due: base.Add(90 * time.Second), JobID: "held-a", Kind: store.KindRetry, RunID: "held-a@1", Attempt: 3, Revision: 7, Payload: []byte("run")}
	dag := store.DueEntry{Due: base.Add(30 * time.Second), JobID: "held-a", Kind: store.KindDAG, RunID: "dag-1/node", Attempt: 1, Revision: 7}
	other := store.DueEntry{Due: base, JobID: "held-b", Kind: store.KindTrigger, RunID: "held-b@2", Attempt: 1, Revision: 1}

	none, err := s.ListHeld(ctx, "held-a")
	require.NoError(t, err)
	assert.Empty(t, none)

	require.NoError(t, s.HoldDue(ctx, retry, dag, other))
	require.NoError(t, s.HoldDue(ctx, retry), "holding again is idempotent")
	got, err := s.ListHeld(ctx, "held-a")
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, dag, got[0], "due order")
	assert.Equal(t, retry, got[1])

	require.NoError(t, s.DeleteHeld(ctx, dag.Key(), dag.Key()))
	got, err = s.ListHeld(ctx, "held-a")
	require.NoError(t, err)
	assert.Equal(t, []store.DueEntry{retry}, got)
	got, err = s.ListHeld(ctx, "held-b")
	require.NoError(t, err)
	assert.Equal(t, []store.DueEntry{other}, got)

	require.Error(t, s.HoldDue(ctx, store.DueEntry{JobID: "held-a"}), "an invalid entry is refused")
	require.Error(t, s.DeleteHeld(ctx, store.DueKey{}), "an invalid key is refused")
}
