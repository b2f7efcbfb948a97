package dispatcher

import (
	"context"
	"io"
	"log/slog"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sundialhq/sundial/enqueue"
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
// for good. The race depends on the order in which the lookups reach the
// broker, so the scenario runs several times, each on a new cluster.
func TestNewGroupReadsAWakeupWrittenWhileItFindsItsStart(t *testing.T) {
	t.Parallel()
	const rounds = 5
	for round := range rounds {
		if !wakeupWrittenDuringLookup(t) {
			t.Fatalf("round %d of %d: the wake-up written while the dispatcher looked up its start offsets was never read", round+1, rounds)
		}
	}
}

// wakeupWrittenDuringLookup runs the scenario once on a new cluster and
// reports whether the dispatcher read the wake-up.
func wakeupWrittenDuringLookup(t *testing.T) bool {
	t.Helper()
	const shards = 4
	names := topics.Names{}
	specs, err := names.Specs(shards)
	require.NoError(t, err)
	var seeds []kfake.Opt
	for _, s := range specs {
		seeds = append(seeds, kfake.SeedTopics(s.Partitions, s.Name))
	}
	cluster, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, seeds...)...)
	require.NoError(t, err)
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	st, err := memory.New(memory.Options{})
	require.NoError(t, err)
	_, err = st.InitCluster(ctx, shards)
	require.NoError(t, err)

	// The wake-up of an entry due beyond the loaded window: read, it is
	// counted as ignored.
	due := time.Now().Add(time.Hour).Truncate(time.Second)
	value, err := enqueue.Encode(store.DueEntry{Due: due, JobID: "woken", Kind: store.KindScheduled,
		RunID: store.RunID("woken", due), Attempt: 1, Revision: 1})
	require.NoError(t, err)
	shard := int32(store.ShardOf("woken", shards))
	wakeup := &kgo.Record{Topic: names.Shards(), Partition: shard, Key: []byte("woken"), Value: value}

	// The enqueuer's producer, on connections of its own.
	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.RecordPartitioner(enqueue.Partitioner(names, nil)), kgo.ProducerLinger(0))
	require.NoError(t, err)
	defer producer.Close()
	details, err := kadm.NewClient(producer).ListTopics(ctx, names.Shards())
	require.NoError(t, err)
	shardsID := details[names.Shards()].ID // fetches may name topics by id

	// After the broker answers the first lookup by time on sundial.shards
	// (nothing there: the topic is empty), the next request it handles
	// waits until the wake-up is written.
	var (
		armedBy           atomic.Pointer[kmsg.ListOffsetsRequest]
		written, produced atomic.Bool
		wakeupOffset      atomic.Int64
		// minFetch is the lowest offset fetched of the shard's partition,
		// whenever: once it is past the wake-up, nothing brings it back.
		minFetch atomic.Int64
	)
	minFetch.Store(math.MaxInt64)
	cluster.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		list := req.(*kmsg.ListOffsetsRequest)
		for _, tp := range list.Topics {
			for _, p := range tp.Partitions {
				if tp.Topic == names.Shards() && p.Timestamp >= 0 && !written.Load() {
					armedBy.CompareAndSwap(nil, list)
				}
			}
		}
		return nil, nil, false // the cluster answers
	})
	cluster.Control(func(r kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		// Not the lookup itself (its controls run before the broker
		// answers it): the request the broker handles after it.
		if by := armedBy.Load(); by != nil && kmsg.Request(by) != r && written.CompareAndSwap(false, true) {
			cluster.SleepControl(func() {
				if err := producer.ProduceSync(ctx, wakeup).FirstErr(); err != nil {
					t.Errorf("produce the wake-up: %v", err)
					return
				}
				wakeupOffset.Store(wakeup.Offset)
				produced.Store(true)
			})
		}
		return nil, nil, false
	})
	cluster.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		for _, tp := range req.(*kmsg.FetchRequest).Topics {
			for _, p := range tp.Partitions {
				if (tp.Topic == names.Shards() || tp.TopicID == shardsID) && p.Partition == shard {
					lowerTo(&minFetch, p.FetchOffset)
				}
			}
		}
		return nil, nil, false
	})

	d, err := New(Config{Brokers: brokers, Store: st, Topics: names, InstanceID: "new-group",
		SessionTimeout: 6 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	require.NoError(t, d.Start(ctx))
	defer d.Stop()

	require.Eventually(t, produced.Load, 30*time.Second, 10*time.Millisecond, "the wake-up was never written: no lookup by time")
	read := func() float64 {
		return testutil.ToFloat64(d.m.wakeups.WithLabelValues("taken")) +
			testutil.ToFloat64(d.m.wakeups.WithLabelValues("ignored")) +
			testutil.ToFloat64(d.m.wakeups.WithLabelValues("invalid"))
	}
	skipped := func() bool { m := minFetch.Load(); return m != math.MaxInt64 && m > wakeupOffset.Load() }
	require.Eventually(t, func() bool { return read() >= 1 || skipped() }, 30*time.Second, 10*time.Millisecond,
		"the dispatcher neither read the wake-up nor fetched past it")
	if read() >= 1 {
		return true
	}
	t.Logf("the dispatcher started shard %d at offset %d, past the wake-up at %d", shard, minFetch.Load(), wakeupOffset.Load())
	return false
}

// lowerTo lowers v to o if o is lower.
func lowerTo(v *atomic.Int64, o int64) {
	for {
		cur := v.Load()
		if o >= cur || v.CompareAndSwap(cur, o) {
			return
		}
	}
}
