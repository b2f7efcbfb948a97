package dispatcher

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/store"
)

// TestJobFeed runs the jobs feed on the real Kafka: it becomes fresh once
// it has read sundial.jobs.status to the end, and every answer it reads
// drops its job from memory, so the next firing reads the job again.
func TestJobFeed(t *testing.T) {
	t.Parallel()
	k := testenv.NeedKafka(t)
	names := topics.Names{Prefix: k.TopicPrefix}
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.ProducerLinger(0))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	spec := topics.Spec{Name: names.JobsStatus(), Partitions: topics.JobsStatusPartitions}
	_, err = topics.Ensure(ctx, kadm.NewClient(cl), []topics.Spec{spec}, 1)
	require.NoError(t, err)
	require.NoError(t, waitForLeaders(ctx, kadm.NewClient(cl), []topics.Spec{spec}))
	// An answer written before the feed starts is not news to it.
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: names.JobsStatus(), Key: []byte("old")}).FirstErr())

	r := &countingReader{jobs: map[string]store.Job{"a": {ID: "a", Revision: 1}, "b": {ID: "b", Revision: 1}, "old": {ID: "old", Revision: 1}}}
	cache := newTestCache(t, r)
	started := time.Now()
	feed, err := startJobFeed([]kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, names.JobsStatus(), cache, time.Now, cache.m, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	t.Cleanup(feed.Stop)
	require.Eventually(t, func() bool { return !cache.freshness().Before(started) }, time.Minute, 10*time.Millisecond, "the feed never caught up")
	t.Logf("feed caught up %s after start", time.Since(started).Round(time.Millisecond))

	due := time.Now().Add(time.Minute)
	cache.prefetch(ctx, map[string]time.Time{"a": due, "b": due, "old": due})
	require.Equal(t, int64(3), r.reads.Load())

	r.set(store.Job{ID: "a", Revision: 2})
	answered := time.Now()
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: names.JobsStatus(), Key: []byte("a")}).FirstErr())
	require.Eventually(t, func() bool { return cache.freshness().After(answered) }, time.Minute, 10*time.Millisecond, "the feed does not advance")
	t.Logf("an answer reached the cache %s after its acknowledgement", time.Since(answered).Round(time.Millisecond))

	j, _, err := cache.get(ctx, "a", due)
	require.NoError(t, err)
	assert.Equal(t, int64(2), j.Revision, "the changed job is read again")
	for _, id := range []string{"b", "old"} {
		_, _, err = cache.get(ctx, id, due)
		require.NoError(t, err)
	}
	assert.Equal(t, int64(4), r.reads.Load(), "only the job answered since the feed started is read again")
	feed.Stop()
	feed.Stop() // idempotent
}
