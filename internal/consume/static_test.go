package consume_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/internal/consume"
	"github.com/sundialhq/sundial/internal/testenv"
)

// member is one static member of a test group: what it was assigned and
// how many times its assignment changed.
type member struct {
	cl *kgo.Client

	mu      sync.Mutex
	owned   []int32
	changes int
}

func (m *member) assigned(_ context.Context, _ *kgo.Client, a map[string][]int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ps := range a {
		m.owned = append(m.owned, ps...)
	}
	slices.Sort(m.owned)
	m.changes++
}

func (m *member) revoked(_ context.Context, _ *kgo.Client, r map[string][]int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ps := range r {
		m.owned = slices.DeleteFunc(m.owned, func(p int32) bool { return slices.Contains(ps, p) })
	}
	if len(r) > 0 {
		m.changes++
	}
}

func (m *member) state() ([]int32, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.owned), m.changes
}

// join starts a static member of group over topic and polls it until the
// test ends or the member is closed. The session timeout is long (a
// minute), so nothing in the test can come from a session expiring.
func join(t *testing.T, brokers []string, group, topic, instance string) *member {
	t.Helper()
	m := &member{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.InstanceID(instance),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.SessionTimeout(time.Minute), kgo.HeartbeatInterval(time.Second),
		kgo.OnPartitionsAssigned(m.assigned), kgo.OnPartitionsRevoked(m.revoked),
		kgo.OnPartitionsLost(m.revoked))
	require.NoError(t, err)
	m.cl = cl
	go func() {
		for {
			if f := cl.PollFetches(context.Background()); f.IsClientClosed() {
				return
			}
		}
	}()
	t.Cleanup(cl.Close)
	return m
}

func groupMembers(t *testing.T, adm *kadm.Client, group string) []string {
	t.Helper()
	described, err := adm.DescribeGroups(t.Context(), group)
	require.NoError(t, err)
	var ids []string
	for _, m := range described[group].Members {
		if m.InstanceID != nil {
			ids = append(ids, *m.InstanceID)
		}
	}
	slices.Sort(ids)
	return ids
}

// A static member that crashes (closes without leaving) and comes back
// under its instance id gets its own partitions back, and the other member
// is not rebalanced; one that stops with LeaveStatic is gone from the group
// at once, and the other member takes its partitions without waiting for
// the session timeout.
func TestStaticMemberKeepsItsPartitionsAcrossACrashAndLeavesOnStop(t *testing.T) {
	k, adm, topic, group := groupTopic(t, "static", 4)

	a := join(t, k.Brokers, group, topic, "a")
	b := join(t, k.Brokers, group, topic, "b")
	settled := func() bool {
		pa, _ := a.state()
		pb, _ := b.state()
		return len(pa) == 2 && len(pb) == 2
	}
	require.Eventually(t, settled, 3*time.Minute, 100*time.Millisecond, "the two members share the four partitions")
	aOwned, _ := a.state()
	_, bChanges := b.state()

	// A crash: a static member's Close sends no LeaveGroup.
	a.cl.Close()
	assert.Equal(t, []string{"a", "b"}, groupMembers(t, adm, group), "a crashed static member stays in the group")
	again := join(t, k.Brokers, group, topic, "a")
	require.Eventually(t, func() bool { p, _ := again.state(); return len(p) > 0 }, 3*time.Minute, 100*time.Millisecond,
		"the restarted member is assigned partitions")
	owned, _ := again.state()
	assert.Equal(t, aOwned, owned, "the restarted member gets its own partitions back")
	bOwned, changes := b.state()
	assert.Equal(t, bChanges, changes, "the other member was not rebalanced")
	assert.Len(t, bOwned, 2)

	// A stop: LeaveStatic leaves for good, so b gets every partition
	// though the session timeout (a minute) has not passed.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	require.NoError(t, consume.LeaveStatic(ctx, again.cl, group, "a"))
	assert.Equal(t, []string{"b"}, groupMembers(t, adm, group), "a stopped static member has left the group")
	require.Eventually(t, func() bool { p, _ := b.state(); return len(p) == 4 }, 3*time.Minute, 100*time.Millisecond,
		"the remaining member takes the stopped member's partitions")
}

// groupTopic needs the stack's Kafka and makes a topic of partitions for
// the test, named after name, with a group name beside it; the admin
// client is closed when the test ends.
func groupTopic(t *testing.T, name string, partitions int32) (testenv.Kafka, *kadm.Client, string, string) {
	t.Helper()
	k := testenv.NeedKafka(t)
	topic, group := k.TopicPrefix+name, k.TopicPrefix+name+"-group"
	adm, err := kafkaAdmin(k.Brokers)
	require.NoError(t, err)
	t.Cleanup(adm.Close)
	_, err = adm.CreateTopic(t.Context(), partitions, 1, nil, topic)
	require.NoError(t, err)
	return k, adm, topic, group
}

func kafkaAdmin(brokers []string) (*kadm.Client, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	return kadm.NewClient(cl), nil
}
