package runner

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// committer commits the watermarks of the backlog's partitions: every
// Config.CommitInterval (loop), when partitions are revoked (their last
// commit), and once more when the runner drains. It is the consumer group's
// rebalance listener: assigned partitions start their bookkeeping, revoked
// and lost ones are dropped from the backlog.
type committer struct {
	in       *backlog
	log      *slog.Logger
	m        *metrics
	interval time.Duration
	// consumer is the group consumer; set by Runner.start.
	consumer *kgo.Client
	// mu serialises commits with revocation, so that no commit of a
	// revoked partition is sent after the revocation's own commit.
	mu sync.Mutex
}

// onAssigned starts the bookkeeping of the assigned partitions.
func (c *committer) onAssigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	c.in.assign(assigned)
	c.log.Info("partitions assigned", "partitions", assigned)
}

// onRevoked commits the watermarks of the revoked partitions, then forgets
// them: queued records are dropped (the next owner reads them again), and
// executing ones finish but no longer count for commits.
func (c *committer) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	offsets := c.in.dropPartitions(revoked, true)
	if len(offsets) > 0 && !c.in.killed.Load() {
		c.commitOffsets(ctx, offsets)
	}
	c.log.Info("partitions revoked", "partitions", revoked)
}

// onLost forgets the partitions without committing: another member may
// already own them.
func (c *committer) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.in.dropPartitions(lost, false)
	c.log.Warn("partitions lost", "partitions", lost)
}

// loop commits every interval until ctx ends.
func (c *committer) loop(ctx context.Context) {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.commit(ctx)
		}
	}
}

// commit commits the watermark of every partition that moved since its last
// commit.
func (c *committer) commit(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if offsets := c.in.committable(); len(offsets) > 0 {
		c.commitOffsets(ctx, offsets)
	}
}

// commitOffsets commits synchronously and records what the broker accepted.
// The caller holds mu.
func (c *committer) commitOffsets(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset) {
	c.consumer.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			c.m.commitErrors.Inc()
			if !errors.Is(err, context.Canceled) {
				c.log.Warn("offset commit failed", "err", err)
			}
			return
		}
		c.in.markCommitted(offsets, resp)
	})
}
