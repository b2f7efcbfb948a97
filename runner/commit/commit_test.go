package commit

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// op is one step of a scenario: add or finish an offset, then check.
type op struct {
	add, done int64 // -1: no such step
	ok        bool  // what Add or Done returns
	// want is the committable offset after the step and whether it is new.
	want    int64
	wantNew bool
	pending int
}

func add(off int64, ok bool, want int64, wantNew bool, pending int) op {
	return op{add: off, done: -1, ok: ok, want: want, wantNew: wantNew, pending: pending}
}

func done(off int64, ok bool, want int64, wantNew bool, pending int) op {
	return op{add: -1, done: off, ok: ok, want: want, wantNew: wantNew, pending: pending}
}

func TestPartitionWatermark(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ops  []op
	}{
		{"nothing finished commits nothing", []op{
			add(0, true, -1, false, 1),
			add(1, true, -1, false, 2),
		}},
		{"in order", []op{
			add(0, true, -1, false, 1),
			add(1, true, -1, false, 2),
			done(0, true, 1, true, 1),
			done(1, true, 2, true, 0),
		}},
		{"a long record pins the watermark, later ones still finish", []op{
			add(10, true, -1, false, 1),
			add(11, true, -1, false, 2),
			add(12, true, -1, false, 3),
			done(12, true, -1, false, 3),
			done(11, true, -1, false, 3),
			done(10, true, 13, true, 0),
		}},
		{"watermark stops at the first unfinished record", []op{
			add(0, true, -1, false, 1),
			add(1, true, -1, false, 2),
			add(2, true, -1, false, 3),
			done(0, true, 1, true, 2),
			done(2, true, 1, true, 2),
			done(1, true, 3, true, 0),
		}},
		{"gaps in offsets (compaction, transaction markers)", []op{
			add(5, true, -1, false, 1),
			add(9, true, -1, false, 2),
			done(5, true, 6, true, 1),
			done(9, true, 10, true, 0),
		}},
		{"a record fetched again is refused", []op{
			add(3, true, -1, false, 1),
			add(3, false, -1, false, 1),
			add(2, false, -1, false, 1),
			done(3, true, 4, true, 0),
			add(3, false, 4, true, 0),
		}},
		{"finishing twice or an unknown offset is refused", []op{
			add(0, true, -1, false, 1),
			add(1, true, -1, false, 2),
			done(1, true, -1, false, 2),
			done(1, false, -1, false, 2),
			done(7, false, -1, false, 2),
			done(0, true, 2, true, 0),
			done(0, false, 2, true, 0),
		}},
		{"negative offsets are refused", []op{
			add(-5, false, -1, false, 0),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := NewPartition()
			for i, o := range tt.ops {
				var got bool
				if o.add >= 0 || o.done < 0 {
					got = p.Add(o.add)
				} else {
					got = p.Done(o.done)
				}
				require.Equal(t, o.ok, got, "step %d return", i)
				off, isNew := p.Committable()
				assert.Equal(t, o.want, off, "step %d committable", i)
				assert.Equal(t, o.wantNew, isNew, "step %d new", i)
				assert.Equal(t, o.pending, p.Pending(), "step %d pending", i)
			}
		})
	}
}

func TestMarkCommittedNeverMovesBack(t *testing.T) {
	t.Parallel()
	p := NewPartition()
	for off := int64(0); off < 4; off++ {
		require.True(t, p.Add(off))
	}
	require.True(t, p.Done(0))
	require.True(t, p.Done(1))
	off, ok := p.Committable()
	require.True(t, ok)
	require.EqualValues(t, 2, off)
	p.MarkCommitted(off)
	_, ok = p.Committable()
	assert.False(t, ok, "nothing new after commit")
	p.MarkCommitted(1) // a late acknowledgement of an older commit
	_, ok = p.Committable()
	assert.False(t, ok)
	require.True(t, p.Done(3))
	_, ok = p.Committable()
	assert.False(t, ok, "3 is finished but 2 is not")
	assert.Equal(t, 1, p.Unfinished())
	require.True(t, p.Done(2))
	off, ok = p.Committable()
	assert.True(t, ok)
	assert.EqualValues(t, 4, off)
}

// TestRandomOrder checks the invariant against a model: the watermark is
// always one past the longest finished prefix of what was added.
func TestRandomOrder(t *testing.T) {
	t.Parallel()
	const n = 200
	p := NewPartition()
	for off := int64(0); off < n; off++ {
		require.True(t, p.Add(off*2)) // gaps between offsets
	}
	finished := make([]bool, n)
	// A fixed permutation: multiply by a unit modulo n.
	for k := 0; k < n; k++ {
		i := (k * 77) % n
		require.True(t, p.Done(int64(i*2)))
		finished[i] = true
		prefix := 0
		for prefix < n && finished[prefix] {
			prefix++
		}
		off, _ := p.Committable()
		if prefix == 0 {
			assert.EqualValues(t, -1, off)
		} else {
			assert.EqualValues(t, int64((prefix-1)*2+1), off)
		}
	}
	assert.Zero(t, p.Pending())
}
