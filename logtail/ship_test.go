package logtail_test

import (
	"context"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/logtail"
)

func setup(t *testing.T, b logtail.Bounds) (*logtail.Shipper, logtail.Reader, *miniredis.Miniredis) {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	s, err := logtail.NewShipper(logtail.ShipperConfig{Redis: rdb, KeyPrefix: "t:", Bounds: b})
	require.NoError(t, err)
	return s, logtail.Reader{Redis: rdb, KeyPrefix: "t:"}, mr
}

// read reads the chunks of the test's attempt after offset.
func read(t *testing.T, r logtail.Reader, offset string) logtail.Batch {
	t.Helper()
	b, err := r.Read(context.Background(), "job", "job@1", 1, offset, 100)
	require.NoError(t, err)
	return b
}

func TestShipThenRead(t *testing.T) {
	t.Parallel()
	s, r, _ := setup(t, logtail.Bounds{})
	tail := s.Open("job", "job@1", 1)
	tail.Line("one")
	tail.Line("two")
	s.Flush(context.Background())
	b := read(t, r, "")
	require.True(t, b.Exists)
	require.Len(t, b.Chunks, 1)
	assert.Equal(t, []string{"one", "two"}, b.Chunks[0].Lines)
	assert.False(t, b.Chunks[0].End)

	tail.Line("three")
	tail.Close()
	tail.Line("after the end")
	s.Flush(context.Background())
	b = read(t, r, b.Chunks[0].Offset)
	require.Len(t, b.Chunks, 1, "resuming after the first chunk reads the second only")
	assert.Equal(t, []string{"three"}, b.Chunks[0].Lines)
	assert.True(t, b.Chunks[0].End)

	s.Flush(context.Background())
	assert.Len(t, read(t, r, "").Chunks, 2, "nothing more is written after the end")
}

func TestNothingLoggedWritesNothing(t *testing.T) {
	t.Parallel()
	s, r, mr := setup(t, logtail.Bounds{})
	tail := s.Open("job", "job@1", 1)
	tail.Close()
	s.Flush(context.Background())
	assert.False(t, read(t, r, "").Exists)
	assert.Empty(t, mr.Keys())
	var nilTail *logtail.Tail
	nilTail.Line("ignored")
	nilTail.Close()
}

func TestBoundsHold(t *testing.T) {
	t.Parallel()
	s, r, mr := setup(t, logtail.Bounds{ChunkBytes: 100, AttemptBytes: 250})
	tail := s.Open("job", "job@1", 1)
	line := strings.Repeat("x", 19) // 20 bytes with its newline
	for range 10 {
		tail.Line(line)
	}
	s.Flush(context.Background())
	for range 10 {
		tail.Line(line)
	}
	s.Flush(context.Background())
	for range 10 {
		tail.Line(line)
	}
	tail.Close()
	s.Flush(context.Background())
	b := read(t, r, "")
	require.Len(t, b.Chunks, 3)
	var shipped int
	var dropped int64
	for _, c := range b.Chunks {
		chunk := 0
		for _, l := range c.Lines {
			chunk += len(l) + 1
		}
		assert.LessOrEqual(t, chunk, 100, "a chunk stays within ChunkBytes")
		shipped += chunk
		dropped += c.Dropped
	}
	assert.Equal(t, 240, shipped, "the attempt ships no more than AttemptBytes")
	assert.Equal(t, int64(30-12), dropped, "every line left out is counted")
	assert.True(t, b.Chunks[2].End)
	assert.Positive(t, mr.TTL(logtail.Key("t:", "job", "job@1", 1)), "the stream expires")
}

func TestBadOffset(t *testing.T) {
	t.Parallel()
	_, r, _ := setup(t, logtail.Bounds{})
	_, err := r.Read(context.Background(), "job", "job@1", 1, "+", 10)
	require.ErrorIs(t, err, logtail.ErrBadOffset)
	require.NoError(t, logtail.CheckOffset("1700000000000-3"))
}
