package enqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/sundialhq/sundial/enqueue"
	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/memory"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	plain, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	require.NoError(t, err)
	defer plain.Close()
	err = enqueue.Config{Client: plain, Shards: -1, WakeHorizon: time.Minute}.Validate()
	require.Error(t, err)
	for _, want := range []string{"store: required", "client: must be created with", "shards -1", "wake horizon 1m0s"} {
		assert.ErrorContains(t, err, want)
	}
	_, err = enqueue.New(enqueue.Config{})
	assert.ErrorContains(t, err, "client: required")
}

func TestEnqueueRefusesInvalidEntriesBeforeWriting(t *testing.T) {
	t.Parallel()
	st := newStore(t, 8)
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.RecordPartitioner(enqueue.Partitioner(topics.Names{}, nil)))
	require.NoError(t, err)
	defer cl.Close()
	reg := prometheus.NewPedanticRegistry()
	q, err := enqueue.New(enqueue.Config{Store: st, Client: cl, Shards: 8, Registerer: reg})
	require.NoError(t, err)
	good := entry("good", time.Now().Add(time.Hour), store.KindScheduled)
	err = q.Enqueue(t.Context(), good, store.DueEntry{JobID: "bad"})
	require.ErrorIs(t, err, store.ErrInvalid)
	assert.ErrorContains(t, err, `entry 1 (job "bad")`)
	n := 0
	for _, err := range st.ListBucket(t.Context(), store.BucketOf(good.Due), store.ShardOf("good", 8)) {
		require.NoError(t, err)
		n++
	}
	assert.Zero(t, n, "nothing may be written when an entry is invalid")
	assert.Equal(t, uint64(1), sample(t, reg, "sundial_enqueue_duration_seconds", "op", "enqueue", "outcome", "invalid").GetHistogram().GetSampleCount())
	assert.Zero(t, sample(t, reg, "sundial_enqueue_entries_total", "kind", "scheduled").GetCounter().GetValue())
}

// A wake-up Kafka does not acknowledge fails the call after the store write:
// the entry is counted as stored, the wake-up as failed.
func TestEnqueueCountsFailedWakeUps(t *testing.T) {
	t.Parallel()
	st := newStore(t, 8)
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.RecordPartitioner(enqueue.Partitioner(topics.Names{}, nil)))
	require.NoError(t, err)
	defer cl.Close()
	reg := prometheus.NewPedanticRegistry()
	q, err := enqueue.New(enqueue.Config{Store: st, Client: cl, Shards: 8, Registerer: reg})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	err = q.Enqueue(ctx, entry("soon", time.Now().Add(time.Second), store.KindRetry), entry("later", time.Now().Add(time.Hour), store.KindScheduled))
	require.ErrorContains(t, err, "wake: produce 1 wake-ups")
	assert.Equal(t, 1.0, sample(t, reg, "sundial_enqueue_entries_total", "kind", "retry").GetCounter().GetValue())
	assert.Equal(t, 1.0, sample(t, reg, "sundial_enqueue_entries_total", "kind", "scheduled").GetCounter().GetValue())
	assert.Equal(t, 1.0, sample(t, reg, "sundial_enqueue_wakeups_total", "result", "failed").GetCounter().GetValue())
	assert.Equal(t, 1.0, sample(t, reg, "sundial_enqueue_wakeups_total", "result", "skipped").GetCounter().GetValue())
	assert.Zero(t, sample(t, reg, "sundial_enqueue_wakeups_total", "result", "produced").GetCounter().GetValue())
	assert.Equal(t, uint64(1), sample(t, reg, "sundial_enqueue_duration_seconds", "op", "enqueue", "outcome", "wake_error").GetHistogram().GetSampleCount())

	_, err = enqueue.New(enqueue.Config{Store: st, Client: cl, Shards: 8, Registerer: reg})
	assert.ErrorContains(t, err, "enqueue: register metrics", "two Enqueuers cannot share a registry")
}

// sample returns the series of the family name with the given label pairs.
func sample(t *testing.T, g prometheus.Gatherer, name string, labels ...string) *dto.Metric {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue series
				}
			}
			return m
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return nil
}

func newStore(t *testing.T, shards int) *memory.Store {
	t.Helper()
	st, err := memory.New(memory.Options{})
	require.NoError(t, err)
	_, err = st.InitCluster(t.Context(), shards)
	require.NoError(t, err)
	return st
}

// TestEnqueueWakesShardOwner runs on a real Kafka: each entry is stored, and a
// wake-up carrying it lands on the partition of its shard; entries beyond the
// wake horizon are stored without a wake-up.
func TestEnqueueWakesShardOwner(t *testing.T) {
	t.Parallel()
	k := testenv.NeedKafka(t)
	const shards = 6
	names := topics.Names{Prefix: k.TopicPrefix}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.RecordPartitioner(enqueue.Partitioner(names, nil)))
	require.NoError(t, err)
	defer cl.Close()
	specs, err := names.Specs(shards)
	require.NoError(t, err)
	_, err = topics.Ensure(ctx, kadm.NewClient(cl), specs, 1)
	require.NoError(t, err)
	waitForLeaders(t, kadm.NewClient(cl), names.Shards(), shards)

	st := newStore(t, shards)
	now := time.Now()
	reg := prometheus.NewPedanticRegistry()
	q, err := enqueue.New(enqueue.Config{Store: st, Client: cl, Topics: names, Shards: shards, Now: func() time.Time { return now }, Registerer: reg})
	require.NoError(t, err)

	var soon []store.DueEntry
	for _, job := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		e := entry(job, now.Add(2*time.Second), store.KindRetry)
		e.Attempt = 3
		soon = append(soon, e)
	}
	late := entry("late", now.Add(enqueue.DefaultWakeHorizon+time.Second), store.KindScheduled)
	past := entry("past", now.Add(-time.Hour), store.KindTrigger)
	all := append([]store.DueEntry{late, past}, soon...)
	require.NoError(t, q.Enqueue(ctx, all...))

	for _, e := range all {
		found := false
		for got, err := range st.ListBucket(ctx, store.BucketOf(e.Due), store.ShardOf(e.JobID, shards)) {
			require.NoError(t, err)
			found = found || got.RunID == e.RunID
		}
		assert.True(t, found, "entry of %s not stored", e.JobID)
	}

	consumer, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.ConsumeTopics(names.Shards()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer consumer.Close()
	woken := map[string]store.DueEntry{}
	for len(woken) < len(soon)+1 {
		fs := consumer.PollFetches(ctx)
		require.NoError(t, fs.Err0())
		fs.EachRecord(func(r *kgo.Record) {
			e, err := enqueue.Decode(r.Value)
			require.NoError(t, err)
			assert.Equal(t, e.JobID, string(r.Key))
			assert.Equal(t, int32(store.ShardOf(e.JobID, shards)), r.Partition, "job %s", e.JobID)
			woken[e.JobID] = e
		})
	}
	assert.NotContains(t, woken, "late", "an entry beyond the wake horizon needs no wake-up")
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, names.Shards())
	require.NoError(t, err)
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	assert.Equal(t, int64(len(soon)+1), total, "one wake-up per entry within the horizon, none more")
	assert.Contains(t, woken, "past")
	assert.Equal(t, 3, woken["a"].Attempt)

	assert.Equal(t, float64(len(soon)), sample(t, reg, "sundial_enqueue_entries_total", "kind", "retry").GetCounter().GetValue())
	assert.Equal(t, 1.0, sample(t, reg, "sundial_enqueue_entries_total", "kind", "trigger").GetCounter().GetValue())
	assert.Equal(t, float64(len(soon)+1), sample(t, reg, "sundial_enqueue_wakeups_total", "result", "produced").GetCounter().GetValue())
	assert.Equal(t, 1.0, sample(t, reg, "sundial_enqueue_wakeups_total", "result", "skipped").GetCounter().GetValue())
	assert.Equal(t, uint64(1), sample(t, reg, "sundial_enqueue_duration_seconds", "op", "enqueue", "outcome", "ok").GetHistogram().GetSampleCount())
}

// waitForLeaders waits until every partition of a new topic has a leader, so
// that the first produce does not race the topic's creation.
func waitForLeaders(t *testing.T, adm *kadm.Client, topic string, partitions int) {
	t.Helper()
	require.Eventually(t, func() bool {
		md, err := adm.Metadata(t.Context(), topic)
		if err != nil {
			return false
		}
		d, ok := md.Topics[topic]
		if !ok || d.Err != nil || len(d.Partitions) != partitions {
			return false
		}
		for _, p := range d.Partitions {
			if p.Err != nil || p.Leader < 0 {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "topic %s has no leader for every partition", topic)
}
