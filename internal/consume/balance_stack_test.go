package consume_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/internal/consume"
)

// TestGroupSharesEveryTopicOnKafka: on the real Kafka, a member that joins
// a group whose only member reads three topics of 16 partitions (as the
// runners read the priority topics, and one of its own, as a runner reads
// its directed topic) ends up with half of each, through the
// cooperative rounds of the brokers' group protocol. With kgo's
// cooperative-sticky balancer alone, the members did not share every topic
// within the three minutes the test waits.
func TestGroupSharesEveryTopicOnKafka(t *testing.T) {
	t.Parallel()
	k, adm, topicA, group := groupTopic(t, "balance-a", 16)
	topicB, topicC := k.TopicPrefix+"balance-b", k.TopicPrefix+"balance-c"
	_, err := adm.CreateTopic(t.Context(), 16, 1, nil, topicB)
	require.NoError(t, err)
	_, err = adm.CreateTopic(t.Context(), 16, 1, nil, topicC)
	require.NoError(t, err)
	// Each member also reads a topic of its own, as each runner reads its
	// directed topic.
	own := []string{k.TopicPrefix + "balance-own-0", k.TopicPrefix + "balance-own-1"}
	for _, topic := range own {
		_, err = adm.CreateTopic(t.Context(), 1, 1, nil, topic)
		require.NoError(t, err)
	}

	owned := make([]func() map[string]int, 2)
	start := func(i int) {
		var mu sync.Mutex
		has := map[string]map[int32]bool{}
		cl, err := kgo.NewClient(append(consume.GroupOptions(group, topicA, topicB, topicC, own[i]), kgo.SeedBrokers(k.Brokers...),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				for topic, ps := range m {
					if has[topic] == nil {
						has[topic] = map[int32]bool{}
					}
					for _, p := range ps {
						has[topic][p] = true
					}
				}
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				for topic, ps := range m {
					for _, p := range ps {
						delete(has[topic], p)
					}
				}
			}))...)
		require.NoError(t, err)
		t.Cleanup(cl.Close)
		ctx, cancel := context.WithCancel(t.Context())
		t.Cleanup(cancel)
		go func() {
			for ctx.Err() == nil {
				cl.PollFetches(ctx)
				cl.AllowRebalance()
			}
		}()
		owned[i] = func() map[string]int {
			mu.Lock()
			defer mu.Unlock()
			return map[string]int{topicA: len(has[topicA]), topicB: len(has[topicB]), topicC: len(has[topicC])}
		}
	}
	start(0)
	all := map[string]int{topicA: 16, topicB: 16, topicC: 16}
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual(all, owned[0]()) }, 3*time.Minute, 50*time.Millisecond,
		"the first member never got every topic")
	start(1)
	half := map[string]int{topicA: 8, topicB: 8, topicC: 8}
	require.Eventually(t, func() bool {
		return assert.ObjectsAreEqual(half, owned[0]()) && assert.ObjectsAreEqual(half, owned[1]())
	}, 3*time.Minute, 50*time.Millisecond, "the two members do not share every topic")
	t.Logf("shares: %v and %v", owned[0](), owned[1]())
}
