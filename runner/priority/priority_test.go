package priority

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func fill(q *Queues[int], level, n int, at time.Time) {
	for i := range n {
		q.Push(level, level*1000+i, at)
	}
}

func TestWeightedShares(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		weights [Levels]int
		picks   int
		want    [Levels]int
	}{
		{"6:3:1", [Levels]int{6, 3, 1}, 100, [Levels]int{60, 30, 10}},
		{"equal", [Levels]int{1, 1, 1}, 99, [Levels]int{33, 33, 33}},
		{"4:2:2", [Levels]int{4, 2, 2}, 80, [Levels]int{40, 20, 20}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// A huge aging period: waits do not change the shares.
			q, err := New[int](tt.weights, 1000*time.Hour)
			require.NoError(t, err)
			for l := range Levels {
				fill(q, l, tt.picks, t0)
			}
			var got [Levels]int
			for range tt.picks {
				_, l, ok := q.Pop(t0)
				require.True(t, ok)
				got[l]++
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestInterleavedNotBursty(t *testing.T) {
	t.Parallel()
	q, err := New[int]([Levels]int{6, 3, 1}, 1000*time.Hour)
	require.NoError(t, err)
	for l := range Levels {
		fill(q, l, 10, t0)
	}
	var seq []int
	for range 10 {
		_, l, _ := q.Pop(t0)
		seq = append(seq, l)
	}
	// Low gets its turn within the first cycle of ten picks and high never
	// takes more than three in a row.
	assert.Contains(t, seq, 2)
	run := 0
	for _, l := range seq {
		if l == 0 {
			run++
			assert.LessOrEqual(t, run, 3, "sequence %v", seq)
		} else {
			run = 0
		}
	}
}

func TestFIFOWithinLevel(t *testing.T) {
	t.Parallel()
	q, err := New[int](DefaultWeights, DefaultAging)
	require.NoError(t, err)
	fill(q, 1, 5, t0)
	for i := range 5 {
		v, l, ok := q.Pop(t0)
		require.True(t, ok)
		assert.Equal(t, 1, l)
		assert.Equal(t, 1000+i, v)
	}
	_, _, ok := q.Pop(t0)
	assert.False(t, ok)
	assert.Zero(t, q.Size())
}

func TestAgingRaisesOldLowPriority(t *testing.T) {
	t.Parallel()
	const aging = time.Second
	q, err := New[int](DefaultWeights, aging)
	require.NoError(t, err)
	// Low priority records have waited 20 aging periods; high ones are fresh.
	fill(q, 2, 20, t0)
	now := t0.Add(20 * aging)
	fill(q, 0, 20, now)
	var got [Levels]int
	for range 20 {
		_, l, _ := q.Pop(now)
		got[l]++
	}
	// Effective weights 6 vs 1*(1+20) = 21: low takes the larger share.
	assert.Greater(t, got[2], got[0], "picks %v", got)

	// Without the wait, the same queues give high the larger share.
	q2, err := New[int](DefaultWeights, aging)
	require.NoError(t, err)
	fill(q2, 2, 20, now)
	fill(q2, 0, 20, now)
	var fresh [Levels]int
	for range 20 {
		_, l, _ := q2.Pop(now)
		fresh[l]++
	}
	assert.Greater(t, fresh[0], fresh[2], "picks %v", fresh)
}

func TestLowNeverStarvesUnderFlood(t *testing.T) {
	t.Parallel()
	q, err := New[int](DefaultWeights, DefaultAging)
	require.NoError(t, err)
	q.Push(2, -1, t0)
	now := t0
	// High priority records keep arriving, one per pick.
	for i := range 50 {
		q.Push(0, i, now)
		v, _, _ := q.Pop(now)
		if v == -1 {
			assert.LessOrEqual(t, i, 10, "the low record waited %d picks", i)
			return
		}
		now = now.Add(10 * time.Millisecond)
	}
	t.Fatal("the low priority record was never picked")
}

func TestRemove(t *testing.T) {
	t.Parallel()
	q, err := New[int](DefaultWeights, DefaultAging)
	require.NoError(t, err)
	for l := range Levels {
		fill(q, l, 4, t0)
	}
	n := q.Remove(func(v int) bool { return v%2 == 1 })
	assert.Equal(t, 6, n)
	assert.Equal(t, 6, q.Size())
	for range 6 {
		v, _, ok := q.Pop(t0)
		require.True(t, ok)
		assert.Zero(t, v%2)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	_, err := New[int]([Levels]int{1, 0, 1}, time.Second)
	assert.ErrorContains(t, err, "weight of level 1")
	_, err = New[int](DefaultWeights, 0)
	assert.ErrorContains(t, err, "aging")
}

func TestPopOldestIsArrivalOrderAcrossLevels(t *testing.T) {
	t.Parallel()
	q, err := New[int](DefaultWeights, DefaultAging)
	require.NoError(t, err)
	now := time.Now()
	// Pushed at the same instant (one fetch), low first: arrival decides,
	// not the weights.
	for i, level := range []int{2, 0, 1, 2, 0} {
		q.Push(level, i, now)
	}
	var got []int
	for {
		v, _, ok := q.PopOldest()
		if !ok {
			break
		}
		got = append(got, v)
	}
	assert.Equal(t, []int{0, 1, 2, 3, 4}, got)
	assert.Zero(t, q.Size())
}

// A group's flood does not delay another group of the same level: lanes
// take turns.
func TestGroupsTakeTurns(t *testing.T) {
	t.Parallel()
	q, err := New[string](DefaultWeights, DefaultAging)
	require.NoError(t, err)
	now := time.Unix(0, 0)
	for i := range 100 {
		q.PushGroup(1, "a", fmt.Sprintf("a%d", i), now)
	}
	for i := range 3 {
		q.PushGroup(1, "b", fmt.Sprintf("b%d", i), now)
	}
	require.Equal(t, 103, q.Len(1))
	require.Equal(t, 3+10, q.CappedLen(1, 10))
	var got []string
	for range 7 {
		v, _, ok := q.Pop(now)
		require.True(t, ok)
		got = append(got, v)
	}
	require.Equal(t, []string{"a0", "b0", "a1", "b1", "a2", "b2", "a3"}, got)
	q.PushGroup(1, "c", "c0", now)
	v, _, _ := q.Pop(now)
	require.Equal(t, "a4", v, "a lane alone keeps its turn")
	v, _, _ = q.Pop(now)
	require.Equal(t, "c0", v, "a new group waits one turn, not behind the flood")
}

func TestRemoveKeepsGroupsAndOrder(t *testing.T) {
	t.Parallel()
	q, err := New[string](DefaultWeights, DefaultAging)
	require.NoError(t, err)
	now := time.Unix(0, 0)
	for _, v := range []string{"a0", "a1", "a2"} {
		q.PushGroup(0, "a", v, now)
	}
	for _, v := range []string{"b0", "b1"} {
		q.PushGroup(0, "b", v, now)
	}
	require.Equal(t, 3, q.Remove(func(v string) bool { return v == "a1" || v[0] == 'b' }))
	require.Equal(t, 2, q.Size())
	var got []string
	for q.Size() > 0 {
		v, _, _ := q.Pop(now)
		got = append(got, v)
	}
	require.Equal(t, []string{"a0", "a2"}, got)
}

// PopOldest ignores the teams' turns as it ignores the weights: a FIFO
// pool starts runs in the order they were fetched.
func TestPopOldestIsArrivalOrderAcrossGroups(t *testing.T) {
	t.Parallel()
	q, err := New[int](DefaultWeights, DefaultAging)
	require.NoError(t, err)
	now := time.Unix(0, 0)
	for i, g := range []string{"a", "a", "b", "a", "c", "b"} {
		q.PushGroup(i%Levels, g, i, now)
	}
	v, _, ok := q.Pop(now)
	require.True(t, ok)
	var got []int
	for {
		w, _, ok := q.PopOldest()
		if !ok {
			break
		}
		got = append(got, w)
	}
	want := []int{0, 1, 2, 3, 4, 5}
	want = append(want[:v], want[v+1:]...)
	assert.Equal(t, want, got, "after Pop took %d", v)
	assert.Zero(t, q.Size())
	// The turns still work after PopOldest emptied lanes.
	q.PushGroup(1, "a", 10, now)
	q.PushGroup(1, "a", 11, now)
	q.PushGroup(1, "b", 12, now)
	var turns []int
	for range 3 {
		w, _, _ := q.Pop(now)
		turns = append(turns, w)
	}
	assert.Equal(t, []int{10, 12, 11}, turns)
}
