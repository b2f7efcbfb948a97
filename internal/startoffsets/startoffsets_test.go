package startoffsets_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/internal/startoffsets"
)

// The race itself (a record appended between the lookups) is exercised by
// the client's and the dispatcher's tests; this one checks the offsets of a
// quiet topic.
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
