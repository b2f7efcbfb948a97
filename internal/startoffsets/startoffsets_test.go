package startoffsets_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/internal/startoffsets"
	"github.com/sundialhq/sundial/internal/startoffsets/startoffsetstest"
)

// TestSince checks the offsets of a quiet topic; the race is the next
// test's.
func TestSince(t *testing.T) {
	t.Parallel()
	const topic = "t"
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topic))
	require.NoError(t, err)
	defer cluster.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	require.NoError(t, err)
	defer cl.Close()

	since := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	rec := func(p int32, at time.Time) *kgo.Record {
		return &kgo.Record{Topic: topic, Partition: p, Timestamp: at, Value: []byte("v")}
	}
	// Partition 0: two records before since, then two from since on.
	// Partition 1: only records before since. Partition 2: empty.
	for _, r := range []*kgo.Record{
		rec(0, since.Add(-2*time.Minute)), rec(0, since.Add(-time.Minute)),
		rec(0, since), rec(0, since.Add(time.Minute)),
		rec(1, since.Add(-time.Minute)), rec(1, since.Add(-time.Millisecond)),
	} {
		require.NoError(t, cl.ProduceSync(t.Context(), r).FirstErr())
	}

	got, err := startoffsets.Since(t.Context(), kadm.NewClient(cl), topic, since)
	require.NoError(t, err)
	require.Equal(t, map[int32]int64{0: 2, 1: 2, 2: 0}, got)

	_, err = startoffsets.Since(t.Context(), kadm.NewClient(cl), "missing", since)
	require.ErrorContains(t, err, "missing")
}

// TestSinceReadsARecordWrittenDuringTheLookup: a record appended to a quiet
// partition right after the broker answered Since's lookup by time lies at
// or after the offset Since returns for the partition, so a reader starting
// there reads it. Looked up after the lookup by time, the end would be past
// the record.
func TestSinceReadsARecordWrittenDuringTheLookup(t *testing.T) {
	t.Parallel()
	const topic = "t"
	startoffsetstest.Rounds(t, 5, func(t *testing.T) {
		race := startoffsetstest.Start(t, []kfake.Opt{kfake.SeedTopics(3, topic)}, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		race.Arm(&kgo.Record{Topic: topic, Partition: 1, Value: []byte("v")})

		lookup, err := kgo.NewClient(kgo.SeedBrokers(race.Brokers()...))
		require.NoError(t, err)
		defer lookup.Close()
		starts, err := startoffsets.Since(t.Context(), kadm.NewClient(lookup), topic, time.Now().Add(-time.Minute))
		require.NoError(t, err)

		parts := map[int32]kgo.Offset{}
		for p, o := range starts {
			parts[p] = kgo.NewOffset().At(o)
		}
		reader, err := kgo.NewClient(kgo.SeedBrokers(race.Brokers()...),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}))
		require.NoError(t, err)
		defer reader.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute) // a hang, not a timing
		defer cancel()
		ctx, stop := race.UntilSkipped(ctx)
		defer stop()
		var read bool
		for !read && ctx.Err() == nil {
			reader.PollFetches(ctx).EachRecord(func(*kgo.Record) { read = true })
		}
		race.Await(t, func() bool { return read })
	})
}
