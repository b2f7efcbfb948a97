package dispatcher

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// TestOversizedRunIsDeadLetteredAndShardMovesOn: a job whose run record is
// over the producer's record limit (here the dispatcher's producer allows
// 16 KiB, and the job carries 64 KiB of payload) can never be dispatched.
// Its run is dead-lettered with a reason its team can read, its terminal
// DEAD event is emitted, the shard's watermark passes it, and a later job
// of the same shard fires. Before, the dispatcher retried MESSAGE_TOO_LARGE
// for ever and the watermark stood still.
func TestOversizedRunIsDeadLetteredAndShardMovesOn(t *testing.T) {
	t.Parallel()
	s := newStack(t, 1) // one shard: both jobs share it
	d := s.dispatcher("d1", func(c *Config) {
		c.Kafka = append(c.Kafka, kgo.ProducerBatchMaxBytes(16<<10))
		c.WatermarkInterval = 200 * time.Millisecond
	})
	s.waitOwned(d)

	ctx := t.Context()
	now := time.Now()
	bigDue := store.Truncate(now.Add(3 * time.Second))
	big := jobSpec("team-a.big", atSchedule(bigDue))
	big.OwnerTeam = "team-a"
	big.Payload = make([]byte, 64<<10)
	later := jobSpec("team-a.later", atSchedule(bigDue.Add(2*time.Second)))
	later.OwnerTeam = "team-a"
	s.register(ctx, []*sundialv1.JobSpec{big, later}, time.Now)

	dlq := consumeAll(t, s, s.names.DLQ(), s.names.Events())
	bigRun := store.RunID("team-a.big", bigDue)

	var dl *sundialv1.DeadLetter
	dlq.waitFor(t, 3*time.Minute, "the oversized run was never dead-lettered (the dispatcher retries it for ever)", func(r *kgo.Record) bool {
		if r.Topic != s.names.DLQ() {
			return false
		}
		m := &sundialv1.DeadLetter{}
		if proto.Unmarshal(r.Value, m) != nil || m.GetRun().GetRunId() != bigRun {
			return false
		}
		dl = m
		return true
	})
	assert.Equal(t, "record_too_large", dl.GetLastError().GetCode())
	assert.Contains(t, dl.GetLastError().GetMessage(), "dispatch: run record is ")
	assert.Contains(t, dl.GetLastError().GetMessage(), "bytes, over the limit")
	assert.False(t, dl.GetLastError().GetRetryable())
	assert.Equal(t, "team-a", dl.GetRun().GetOwnerTeam())
	assert.Empty(t, dl.GetRun().GetPayload(), "the dead letter leaves out what made the run too large")

	dlq.waitFor(t, 3*time.Minute, "no DEAD event for the oversized run", func(r *kgo.Record) bool {
		ev := &sundialv1.RunEvent{}
		return r.Topic == s.names.Events() && proto.Unmarshal(r.Value, ev) == nil &&
			ev.GetRunId() == bigRun && ev.GetState() == sundialv1.RunState_RUN_STATE_DEAD
	})

	require.Eventually(t, func() bool { return len(s.runs.jobRuns("team-a.later")) == 1 }, 3*time.Minute, 50*time.Millisecond,
		"the later job of the same shard did not fire")
	require.Eventually(t, func() bool {
		sh, err := s.store.GetShard(ctx, 0)
		return err == nil && sh.Watermark.After(bigDue)
	}, 3*time.Minute, 50*time.Millisecond, "the shard's watermark stays before the oversized run's due time")
	assert.Empty(t, s.runs.jobRuns("team-a.big"), "no record of the oversized run reached the runs topics")
}

// recordLog reads topics from their start, for a test.
type recordLog struct {
	recs chan *kgo.Record
	// seen are the records read so far: a wait looks at them first, so a
	// record read while waiting for another (the two topics' records come
	// in either order) is not lost.
	seen []*kgo.Record
}

func consumeAll(t *testing.T, s *stack, topics ...string) *recordLog {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.kafka.Brokers...), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.MetadataMinAge(100*time.Millisecond))
	require.NoError(t, err)
	l := &recordLog{recs: make(chan *kgo.Record, 1024)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				select {
				case l.recs <- r:
				case <-ctx.Done():
				}
			})
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		cl.Close()
	})
	return l
}

// waitFor reads records until match takes one, failing with msg after
// within.
func (l *recordLog) waitFor(t *testing.T, within time.Duration, msg string, match func(*kgo.Record) bool) {
	t.Helper()
	for _, r := range l.seen {
		if match(r) {
			return
		}
	}
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		select {
		case r := <-l.recs:
			l.seen = append(l.seen, r)
			if match(r) {
				return
			}
		case <-deadline.C:
			require.FailNow(t, msg, "waited %s", within)
		}
	}
}
