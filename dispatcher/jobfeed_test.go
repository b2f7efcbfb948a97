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
	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// TestJobFeed runs the jobs feed on the real Kafka: it becomes fresh once
// it has read sundial.jobs.status to the end, and every answer it reads
// drops its job from memory, so the next firing reads the job again.
func TestJobFeed(t *testing.T) {
	t.Parallel()
	k, names, cl, ctx := statusTopic(t)
	// An answer written before the feed starts is read by its replay, but
	// drops nothing: the job was not in memory yet.
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: names.JobsStatus(), Key: []byte("old")}).FirstErr())

	r := &countingReader{jobs: map[string]store.Job{"a": {ID: "a", Revision: 1}, "b": {ID: "b", Revision: 1}, "old": {ID: "old", Revision: 1}}}
	cache := newTestCache(t, r)
	started := time.Now()
	feed, err := startJobFeed([]kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, names.JobsStatus(), cache, time.Now, DefaultJobFeedReplay, cache.m, slog.New(slog.NewTextHandler(io.Discard, nil)))
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

// TestJobFeedReplaysTheAnswersBeforeItsStart: a feed that has just started
// trusts the snapshots checked within its replay, since it has read every
// answer stamped since, and still distrusts a job the registry answered a
// change for in that time. Answers older than the replay are not read.
// Without the replay a restarted dispatcher read the job of every firing
// until each chain had fired once since its start (a minute and more of
// store reads in the crash bench).
func TestJobFeedReplaysTheAnswersBeforeItsStart(t *testing.T) {
	t.Parallel()
	k, names, cl, ctx := statusTopic(t)

	const replay = time.Hour
	start := time.Now()
	answer := func(job string, rev int64, o sundialv1.DefinitionOutcome, stamped time.Time) *kgo.Record {
		v, err := proto.Marshal(&sundialv1.JobStatus{
			Subject: &sundialv1.JobStatus_JobId{JobId: job}, Source: &sundialv1.RecordSource{Offset: rev},
			Accepted: true, Outcome: o,
		})
		require.NoError(t, err)
		return &kgo.Record{Topic: names.JobsStatus(), Key: []byte(job), Value: v, Timestamp: stamped,
			Headers: []kgo.RecordHeader{{Key: sundialv1.HeaderContentType, Value: []byte(sundialv1.ContentTypeProtobuf)}}}
	}
	updated := sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UPDATED
	require.NoError(t, cl.ProduceSync(ctx,
		// Before the replay: not read.
		answer("ancient", 9, updated, start.Add(-3*replay)),
		// Within it: read, and job "changed" is not trusted below revision 7.
		answer("changed", 7, updated, start.Add(-20*time.Minute)),
		answer("new", 3, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED, start.Add(-20*time.Minute)),
	).FirstErr())

	cache := newTestCache(t, &countingReader{jobs: map[string]store.Job{}})
	feed, err := startJobFeed([]kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, names.JobsStatus(), cache, time.Now, replay,
		cache.m, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	t.Cleanup(feed.Stop)

	entry := func(job string, rev int64) store.DueEntry {
		return store.DueEntry{Due: start, JobID: job, Kind: store.KindScheduled, RunID: job + "@0", Attempt: 1, Revision: rev}
	}
	checked := func(ago time.Duration) store.JobSnapshot {
		return store.JobSnapshot{Spec: []byte("s"), CheckedAt: start.Add(-ago)}
	}
	usable := func(e store.DueEntry, s store.JobSnapshot) bool {
		_, ok := cache.snapshotUsable(e, s, time.Now())
		return ok
	}
	// Waits for the feed's first catch-up (and for a fresh round after
	// any pause of this busy machine).
	require.Eventually(t, func() bool { return usable(entry("steady", 1), checked(10*time.Minute)) }, time.Minute, 10*time.Millisecond,
		"a snapshot checked ten minutes before the feed started, of a job with no answer since, is never trusted")
	assert.False(t, usable(entry("changed", 5), checked(10*time.Minute)), "a job changed to revision 7 within the replay is trusted at revision 5")
	assert.True(t, usable(entry("changed", 7), checked(10*time.Minute)), "the snapshot of the changed job's revision 7")
	assert.True(t, usable(entry("new", 3), checked(10*time.Minute)), "a creation is not a change")
	assert.False(t, usable(entry("steady", 1), checked(replay)), "a snapshot checked before the replay's start")
	cache.mu.Lock()
	_, read := cache.changes.latest("ancient")
	cache.mu.Unlock()
	assert.False(t, read, "an answer stamped before the replay was read")
}

// statusTopic creates sundial.jobs.status under a prefix of the test's own
// on the real Kafka and returns a producing client and a context of two
// minutes for the test.
func statusTopic(t *testing.T) (testenv.Kafka, topics.Names, *kgo.Client, context.Context) {
	t.Helper()
	k := testenv.NeedKafka(t)
	names := topics.Names{Prefix: k.TopicPrefix}
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.ProducerLinger(0))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	spec := topics.Spec{Name: names.JobsStatus(), Partitions: topics.JobsStatusPartitions}
	_, err = topics.Ensure(ctx, kadm.NewClient(cl), []topics.Spec{spec}, 1)
	require.NoError(t, err)
	require.NoError(t, waitForLeaders(ctx, kadm.NewClient(cl), []topics.Spec{spec}))
	return k, names, cl, ctx
}
