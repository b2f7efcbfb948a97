package topics_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/internal/topics"
)

func admin(t *testing.T, brokers []string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

func TestEnsure(t *testing.T) {
	t.Parallel()
	k := testenv.NeedKafka(t)
	adm := admin(t, k.Brokers)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	names := topics.Names{Prefix: k.TopicPrefix}
	specs, err := names.Specs(12)
	require.NoError(t, err)

	res, err := topics.Ensure(ctx, adm, specs, 1)
	require.NoError(t, err)
	require.Len(t, res, len(specs))
	for _, r := range res {
		assert.True(t, r.Created, r.Name)
	}
	details, err := adm.ListTopics(ctx, names.Shards(), names.Jobs())
	require.NoError(t, err)
	assert.Len(t, details[names.Shards()].Partitions, 12)
	assert.Len(t, details[names.Jobs()].Partitions, 16)
	configs, err := adm.DescribeTopicConfigs(ctx, names.Jobs())
	require.NoError(t, err)
	policy, err := configs.On(names.Jobs(), nil)
	require.NoError(t, err)
	found := false
	for _, c := range policy.Configs {
		if c.Key == "cleanup.policy" {
			found = true
			assert.Equal(t, "compact", c.MaybeValue())
		}
	}
	assert.True(t, found, "cleanup.policy of %s is described", names.Jobs())

	// Re-running finds everything in place.
	res, err = topics.Ensure(ctx, adm, specs, 1)
	require.NoError(t, err)
	for _, r := range res {
		assert.False(t, r.Created, r.Name)
	}

	// The same installation with another shard count is refused, naming the
	// topic; the others are still fine.
	other, err := names.Specs(24)
	require.NoError(t, err)
	res, err = topics.Ensure(ctx, adm, other, 1)
	var mismatch *topics.PartitionMismatchError
	require.ErrorAs(t, err, &mismatch)
	assert.Equal(t, names.Shards(), mismatch.Topic)
	assert.Equal(t, int32(12), mismatch.Have)
	assert.Equal(t, int32(24), mismatch.Want)
	assert.ErrorContains(t, err, names.Shards())
	assert.Len(t, res, len(specs)-1)
}

func TestEnsureRejectsBadReplication(t *testing.T) {
	t.Parallel()
	for _, rf := range []int16{0, -2} {
		_, err := topics.Ensure(t.Context(), nil, nil, rf)
		assert.ErrorContains(t, err, "replication factor")
	}
}

func TestSetupUnreachableKafka(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())

	const budget = 2 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), budget)
	defer cancel()
	start := time.Now()
	_, err = topics.Setup(ctx, []string{addr}, topics.Names{}, 8, 1)
	took := time.Since(start)
	require.Error(t, err)
	assert.ErrorContains(t, err, addr)
	assert.Less(t, took, budget+time.Second, "took %v", took)
	t.Logf("setup against %s failed after %v: %v", addr, took.Round(time.Millisecond), err)

	_, err = topics.Setup(t.Context(), nil, topics.Names{}, 8, 1)
	assert.ErrorContains(t, err, "kafka brokers")
	_, err = topics.Setup(t.Context(), []string{addr}, topics.Names{}, 0, 1)
	assert.ErrorContains(t, err, "shards")
}
