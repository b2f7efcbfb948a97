package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/store"
)

func testClusterInit(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	_, err := s.GetClusterConfig(ctx)
	require.ErrorIs(t, err, store.ErrNotInitialized)

	_, err = s.InitCluster(ctx, 0)
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = s.InitCluster(ctx, -3)
	require.ErrorIs(t, err, store.ErrInvalid)

	first, err := s.InitCluster(ctx, 8)
	require.NoError(t, err)
	assert.Equal(t, 8, first.Shards)
	assert.False(t, first.CreatedAt.IsZero())

	again, err := s.InitCluster(ctx, 8)
	require.NoError(t, err, "a second init with the same count is idempotent")
	assert.Equal(t, first.Shards, again.Shards)
	assert.True(t, first.CreatedAt.Equal(again.CreatedAt), "the second init keeps the first one's creation time")

	_, err = s.InitCluster(ctx, 16)
	require.ErrorIs(t, err, store.ErrShardCountMismatch)
	var sce *store.ShardCountError
	require.ErrorAs(t, err, &sce)
	assert.Equal(t, store.ShardCountError{Stored: 8, Requested: 16}, *sce)

	got, err := s.GetClusterConfig(ctx)
	require.NoError(t, err)
	assert.Equal(t, 8, got.Shards, "the conflicting init changed nothing")
}

func testNotInitialized(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	e := store.DueEntry{Due: base, JobID: "j", Kind: store.KindTrigger, RunID: "j@1", Attempt: 1}
	require.ErrorIs(t, s.PutDue(ctx, e), store.ErrNotInitialized)
	_, err := s.UpsertJob(ctx, job("j", "spec", 1, base))
	require.ErrorIs(t, err, store.ErrNotInitialized)
	_, err = s.ClaimShard(ctx, 0, "me", 0)
	require.ErrorIs(t, err, store.ErrNotInitialized)
	for _, err := range s.ListBucket(ctx, base, 0) {
		require.ErrorIs(t, err, store.ErrNotInitialized)
	}
}

// testClaimRace has two claimants read the same epoch and claim at once:
// exactly one wins; the loser can re-read and take over.
func testClaimRace(t *testing.T, s store.Store) {
	initCluster(t, s, 4)
	ctx := ctxOf(t)
	st, err := s.GetShard(ctx, 3)
	require.NoError(t, err)
	assert.Equal(t, store.ShardState{Shard: 3}, st, "a shard never claimed")

	epochs, errs := race(ctx, s, 3, st.Epoch, "a", "b")
	winner, loser := -1, -1
	for i := range errs {
		if errs[i] == nil {
			winner = i
		} else {
			require.ErrorIs(t, errs[i], store.ErrEpochConflict)
			loser = i
		}
	}
	require.NotEqual(t, -1, winner, "one claimant wins")
	require.NotEqual(t, -1, loser, "the other loses")
	assert.Equal(t, int64(1), epochs[winner])

	st, err = s.GetShard(ctx, 3)
	require.NoError(t, err)
	assert.Equal(t, int64(1), st.Epoch)
	assert.Equal(t, []string{"a", "b"}[winner], st.Owner)
	assert.False(t, st.ClaimedAt.IsZero())

	// The loser re-reads and takes over.
	loserName := []string{"a", "b"}[loser]
	e, err := s.ClaimShard(ctx, 3, loserName, st.Epoch)
	require.NoError(t, err)
	assert.Equal(t, int64(2), e)
	st, err = s.GetShard(ctx, 3)
	require.NoError(t, err)
	assert.Equal(t, loserName, st.Owner)

	// Other shards are untouched.
	other, err := s.GetShard(ctx, 2)
	require.NoError(t, err)
	assert.Equal(t, int64(0), other.Epoch)
}

// race runs ClaimShard for each owner at once, all having seen epoch seen.
func race(ctx context.Context, s store.Store, shard int, seen int64, owners ...string) ([]int64, []error) {
	epochs := make([]int64, len(owners))
	errs := make([]error, len(owners))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, owner := range owners {
		wg.Go(func() {
			<-start
			epochs[i], errs[i] = s.ClaimShard(ctx, shard, owner, seen)
		})
	}
	close(start)
	wg.Wait()
	return epochs, errs
}

// testClaimRounds races several claimants for several rounds: every round has
// exactly one winner and the epoch counts the rounds.
func testClaimRounds(t *testing.T, s store.Store) {
	initCluster(t, s, 4)
	ctx := ctxOf(t)
	owners := []string{"d1", "d2", "d3", "d4"}
	const rounds = 5
	for round := range rounds {
		st, err := s.GetShard(ctx, 0)
		require.NoError(t, err)
		require.Equal(t, int64(round), st.Epoch)
		epochs, errs := race(ctx, s, 0, st.Epoch, owners...)
		wins := 0
		for i, err := range errs {
			if err == nil {
				wins++
				assert.Equal(t, st.Epoch+1, epochs[i])
				continue
			}
			require.ErrorIs(t, err, store.ErrEpochConflict, "round %d claimant %s", round, owners[i])
		}
		require.Equal(t, 1, wins, "round %d", round)
	}
	_, err := s.ClaimShard(ctx, 0, "late", 2)
	require.ErrorIs(t, err, store.ErrEpochConflict, "a claim with an epoch read long ago")
	_, err = s.ClaimShard(ctx, 0, "future", rounds+1)
	require.ErrorIs(t, err, store.ErrEpochConflict, "a claim with an epoch that never existed")
}

func testStaleEpochCannotAdvance(t *testing.T, s store.Store) {
	initCluster(t, s, 4)
	ctx := ctxOf(t)
	old, err := s.ClaimShard(ctx, 1, "old", 0)
	require.NoError(t, err)
	w1 := base.Add(time.Minute)
	require.NoError(t, s.AdvanceWatermark(ctx, 1, old, w1))

	next, err := s.ClaimShard(ctx, 1, "new", old)
	require.NoError(t, err)
	require.Greater(t, next, old)

	err = s.AdvanceWatermark(ctx, 1, old, base.Add(2*time.Minute))
	require.ErrorIs(t, err, store.ErrStaleEpoch, "the fenced owner cannot advance")
	st, err := s.GetShard(ctx, 1)
	require.NoError(t, err)
	assert.True(t, st.Watermark.Equal(w1), "the claim kept the watermark and the stale advance did nothing: %v", st.Watermark)
	assert.Equal(t, "new", st.Owner)
	assert.Equal(t, next, st.Epoch)

	require.NoError(t, s.AdvanceWatermark(ctx, 1, next, base.Add(3*time.Minute)))
	require.ErrorIs(t, s.AdvanceWatermark(ctx, 1, next+1, base.Add(4*time.Minute)), store.ErrStaleEpoch, "an epoch nobody claimed")
	require.ErrorIs(t, s.AdvanceWatermark(ctx, 2, 1, base.Add(4*time.Minute)), store.ErrStaleEpoch, "a shard never claimed")
}

func testWatermarkMonotonic(t *testing.T, s store.Store) {
	initCluster(t, s, 4)
	ctx := ctxOf(t)
	e, err := s.ClaimShard(ctx, 2, "me", 0)
	require.NoError(t, err)
	watermark := func() time.Time {
		st, err := s.GetShard(ctx, 2)
		require.NoError(t, err)
		return st.Watermark
	}
	assert.True(t, watermark().IsZero())

	t1 := base.Add(time.Minute + 250*time.Millisecond)
	t2 := base.Add(2 * time.Minute)
	require.NoError(t, s.AdvanceWatermark(ctx, 2, e, t1))
	assert.True(t, watermark().Equal(t1))
	require.NoError(t, s.AdvanceWatermark(ctx, 2, e, t2))
	assert.True(t, watermark().Equal(t2))
	require.NoError(t, s.AdvanceWatermark(ctx, 2, e, t1), "an older watermark is not an error")
	assert.True(t, watermark().Equal(t2), "but does not move it back")
	require.NoError(t, s.AdvanceWatermark(ctx, 2, e, t2))
	assert.True(t, watermark().Equal(t2))
	require.ErrorIs(t, s.AdvanceWatermark(ctx, 2, e, time.Time{}), store.ErrInvalid)

	// Under concurrent advances from the owner the highest wins.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			assert.NoError(t, s.AdvanceWatermark(ctx, 2, e, t2.Add(time.Duration(i)*time.Second)))
		})
	}
	wg.Wait()
	assert.True(t, watermark().Equal(t2.Add(7*time.Second)), "watermark %v", watermark())
}

func testShardValidation(t *testing.T, s store.Store) {
	initCluster(t, s, 4)
	ctx := ctxOf(t)
	for _, shard := range []int{-1, 4, 100} {
		_, err := s.GetShard(ctx, shard)
		require.ErrorIs(t, err, store.ErrInvalid, "shard %d", shard)
		_, err = s.ClaimShard(ctx, shard, "me", 0)
		require.ErrorIs(t, err, store.ErrInvalid, "shard %d", shard)
		require.ErrorIs(t, s.AdvanceWatermark(ctx, shard, 1, base), store.ErrInvalid, "shard %d", shard)
	}
	_, err := s.ClaimShard(ctx, 0, "", 0)
	require.ErrorIs(t, err, store.ErrInvalid)
}
