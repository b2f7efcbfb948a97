package logtail

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestAdmit(t *testing.T) {
	t.Parallel()
	b := Bounds{ChunkBytes: 10, AttemptBytes: 25}
	for _, tc := range []struct {
		name                 string
		chunk, shipped, line int
		want                 bool
	}{
		{"an empty tail takes a line", 0, 0, 4, true},
		{"a line that fills the chunk exactly", 5, 5, 4, true},
		{"a line past the chunk", 6, 6, 4, false},
		{"a line longer than a chunk", 0, 0, 10, false},
		{"a line that fills the attempt exactly", 0, 20, 4, true},
		{"a line past the attempt", 0, 21, 4, false},
		{"an empty line counts its newline", 9, 9, 0, true},
		{"an empty line past a full chunk", 10, 10, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, admit(b, tc.chunk, tc.shipped, tc.line))
		})
	}
}

func TestBoundsValidate(t *testing.T) {
	t.Parallel()
	assert.NoError(t, Bounds{}.Validate())
	err := Bounds{Every: -1, ChunkBytes: -1, AttemptBytes: -1, Retain: -1}.Validate()
	for _, field := range []string{"every", "chunk bytes", "attempt bytes", "retain"} {
		assert.ErrorContains(t, err, field)
	}
	assert.ErrorContains(t, Bounds{Every: 2 * time.Second, Retain: time.Second}.Validate(), "must be at least every")
}

func TestPendingBoundsEachChunkAndTheAttempt(t *testing.T) {
	t.Parallel()
	p := NewPending(Bounds{ChunkBytes: 10, AttemptBytes: 25})
	assert.True(t, p.Empty())
	for range 3 {
		p.Add("1234") // 5 bytes with its newline: two fit a chunk
	}
	lines, dropped := p.Take()
	assert.Equal(t, []string{"1234", "1234"}, lines)
	assert.Equal(t, int64(1), dropped)
	assert.True(t, p.Empty(), "Take starts the next chunk")
	for range 3 {
		p.Add("1234")
	}
	lines, dropped = p.Take()
	assert.Len(t, lines, 2, "a new chunk takes lines again")
	assert.Equal(t, int64(1), dropped)
	p.Add("1234")
	p.Add("1234")
	lines, dropped = p.Take()
	assert.Len(t, lines, 1, "the attempt's bound counts every chunk taken")
	assert.Equal(t, int64(1), dropped)

	p.Skip(math.MaxInt64)
	p.Skip(5)
	_, dropped = p.Take()
	assert.Equal(t, int64(math.MaxInt64), dropped, "a count saturates")
	p.Skip(-3)
	assert.True(t, p.Empty(), "a negative count counts nothing")
}
