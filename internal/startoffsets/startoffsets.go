package startoffsets

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Since returns, for each partition of topic, an offset from which reading
// yields every record stamped at or after since, including those appended
// while it looks (see the package doc). It fails if either lookup fails for
// any partition or the topic has no partitions.
func Since(ctx context.Context, adm *kadm.Client, topic string, since time.Time) (map[int32]int64, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list the end offsets of %s: %w", topic, err)
	}
	byTime, err := adm.ListOffsetsAfterMilli(ctx, since.UnixMilli(), topic)
	if err == nil {
		err = byTime.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list the offsets of %s after %s: %w", topic, since.UTC().Format(time.RFC3339Nano), err)
	}
	starts := map[int32]int64{}
	ends.Each(func(end kadm.ListedOffset) {
		start := end.Offset
		if o, ok := byTime.Lookup(topic, end.Partition); ok && o.Offset >= 0 && o.Offset < start {
			start = o.Offset
		}
		starts[end.Partition] = start
	})
	if len(starts) == 0 {
		return nil, fmt.Errorf("list the end offsets of %s: no partitions", topic)
	}
	return starts, nil
}
