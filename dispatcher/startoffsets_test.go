package dispatcher

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/enqueue"
	"github.com/sundialhq/sundial/internal/startoffsets/startoffsetstest"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/memory"
)

// TestNewGroupReadsAWakeupWrittenWhileItFindsItsStart: a dispatcher in a
// new group (no committed offset on sundial.shards) must read a wake-up
// appended to a quiet shard partition right after the broker answered the
// lookup by time of where to start, and before the partition's end is
// looked up. kgo's AfterMilli reset, finding nothing by time, starts at the
// end looked up after the wake-up was appended: the wake-up, and with it
// the firing of an entry written into a window already loaded, is skipped
// for good.
func TestNewGroupReadsAWakeupWrittenWhileItFindsItsStart(t *testing.T) {
	t.Parallel()
	startoffsetstest.Rounds(t, 5, func(t *testing.T) {
		const shards = 4
		names := topics.Names{}
		// The writer is the enqueuer's producer.
		race := startoffsetstest.Start(t, startoffsetstest.SundialTopics(t, names, shards),
			kgo.RecordPartitioner(enqueue.Partitioner(names, nil)))
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute) // a hang, not a timing
		defer cancel()

		st, err := memory.New(memory.Options{})
		require.NoError(t, err)
		_, err = st.InitCluster(ctx, shards)
		require.NoError(t, err)

		// The wake-up of an entry due beyond the loaded window: read, it
		// is counted as ignored.
		due := time.Now().Add(time.Hour).Truncate(time.Second)
		value, err := enqueue.Encode(store.DueEntry{Due: due, JobID: "woken", Kind: store.KindScheduled,
			RunID: store.RunID("woken", due), Attempt: 1, Revision: 1})
		require.NoError(t, err)
		race.Arm(&kgo.Record{Topic: names.Shards(), Partition: int32(store.ShardOf("woken", shards)), Key: []byte("woken"), Value: value})

		d, err := New(Config{Kafka: []kgo.Opt{kgo.SeedBrokers(race.Brokers()...)}, Store: st, Topics: names, InstanceID: "new-group",
			SessionTimeout: 6 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		require.NoError(t, err)
		require.NoError(t, d.Start(ctx))
		defer d.Stop()

		race.Await(t, func() bool {
			return testutil.ToFloat64(d.m.wakeups.WithLabelValues("taken"))+
				testutil.ToFloat64(d.m.wakeups.WithLabelValues("ignored"))+
				testutil.ToFloat64(d.m.wakeups.WithLabelValues("invalid")) >= 1
		})
	})
}
