package logtail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Chunk is one stream entry: lines an attempt logged within one write.
type Chunk struct {
	// Offset is the entry's id: a tail resumes after it.
	Offset string
	// Lines are the lines, oldest first.
	Lines []string
	// Dropped is how many lines logged within the chunk's time were left
	// out (over the Bounds): after these lines, or among them.
	Dropped int64
	// End says the attempt ended: no entry follows.
	End bool
}

// Batch is what one Read found.
type Batch struct {
	// Chunks are the entries after the offset, oldest first.
	Chunks []Chunk
	// Exists says the attempt's stream exists: its runner shipped
	// something and Redis still holds it.
	Exists bool
}

// Reader reads attempts' logs as the runners' Shippers wrote them.
type Reader struct {
	// Redis holds the streams. Required.
	Redis redis.UniversalClient
	// KeyPrefix is the runners' key prefix (the Shipper's KeyPrefix).
	KeyPrefix string
}

// ErrBadOffset is a resume offset that is no stream entry id.
var ErrBadOffset = errors.New("not an offset of a log tail (milliseconds-sequence)")

var offsetForm = regexp.MustCompile(`^[0-9]{1,20}-[0-9]{1,20}$`)

// CheckOffset returns nil for "" and for an offset a Chunk carried, and
// an error wrapping ErrBadOffset for anything else.
func CheckOffset(offset string) error {
	if offset == "" || offsetForm.MatchString(offset) {
		return nil
	}
	return fmt.Errorf("offset %q: %w", offset, ErrBadOffset)
}

// Read returns up to limit chunks of the attempt's log after offset (""
// from the oldest entry held), in one round trip.
func (r Reader) Read(ctx context.Context, jobID, runID string, attempt uint32, offset string, limit int64) (Batch, error) {
	if err := CheckOffset(offset); err != nil {
		return Batch{}, err
	}
	key := Key(r.KeyPrefix, jobID, runID, attempt)
	start := "-"
	if offset != "" {
		start = "(" + offset
	}
	pipe := r.Redis.Pipeline()
	rng := pipe.XRangeN(ctx, key, start, "+", limit)
	exists := pipe.Exists(ctx, key)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return Batch{}, fmt.Errorf("read log tail %s: %w", key, err)
	}
	msgs, err := rng.Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return Batch{}, fmt.Errorf("read log tail %s: %w", key, err)
	}
	b := Batch{Exists: exists.Val() > 0}
	for _, m := range msgs {
		c, err := chunkOf(m)
		if err != nil {
			return Batch{}, fmt.Errorf("read log tail %s: %w", key, err)
		}
		b.Chunks = append(b.Chunks, c)
	}
	return b, nil
}

// chunkOf decodes one entry.
func chunkOf(m redis.XMessage) (Chunk, error) {
	c := Chunk{Offset: m.ID}
	if v, ok := m.Values[fieldLines].(string); ok {
		if err := json.Unmarshal([]byte(v), &c.Lines); err != nil {
			return Chunk{}, fmt.Errorf("entry %s: lines: %w", m.ID, err)
		}
	}
	if v, ok := m.Values[fieldDropped].(string); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return Chunk{}, fmt.Errorf("entry %s: dropped: %w", m.ID, err)
		}
		c.Dropped = n
	}
	c.End = m.Values[fieldEnd] == "1"
	return c, nil
}
