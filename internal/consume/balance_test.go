package consume

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestBalanceTopic(t *testing.T) {
	t.Parallel()
	type reader struct {
		owned []int32
		gen   int32
		load  int
	}
	tests := []struct {
		name    string
		n       int32
		readers []reader
		want    [][]int32
	}{
		{name: "no reader", n: 4, readers: nil, want: [][]int32{}},
		{name: "a new group shares in order", n: 16, readers: []reader{{}, {}},
			want: [][]int32{{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9, 10, 11, 12, 13, 14, 15}}},
		{name: "three readers of 16: the first gets the extra one", n: 16, readers: []reader{{}, {}, {}},
			want: [][]int32{{0, 1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}, {11, 12, 13, 14, 15}}},
		{name: "the owner of all keeps its share, the lowest first", n: 4, readers: []reader{{}, {owned: []int32{0, 1, 2, 3}}},
			want: [][]int32{{2, 3}, {0, 1}}},
		{name: "owners keep what they own", n: 4, readers: []reader{{owned: []int32{1, 3}}, {owned: []int32{0, 2}}},
			want: [][]int32{{1, 3}, {0, 2}}},
		{name: "the larger share goes to the reader owning more", n: 5, readers: []reader{{owned: []int32{0}}, {owned: []int32{1, 2, 3}}},
			want: [][]int32{{0, 4}, {1, 2, 3}}},
		{name: "a claim at a later generation wins", n: 2, readers: []reader{{owned: []int32{0, 1}, gen: 3}, {owned: []int32{0}, gen: 5}},
			want: [][]int32{{1}, {0}}},
		{name: "claims of partitions the topic no longer has are ignored", n: 2, readers: []reader{{owned: []int32{7}}, {}},
			want: [][]int32{{0}, {1}}},
		{name: "more readers than partitions", n: 2, readers: []reader{{}, {}, {owned: []int32{1}}},
			want: [][]int32{{0}, nil, {1}}},
		{name: "the larger share goes to the less loaded reader", n: 3, readers: []reader{{load: 2}, {load: 1}},
			want: [][]int32{{0}, {1, 2}}},
		{name: "a partition owned weighs more than the load", n: 3, readers: []reader{{owned: []int32{0, 1}, load: 9}, {}},
			want: [][]int32{{0, 1}, {2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			readers := make([]memberOf, len(tt.readers))
			load := make([]int, len(tt.readers))
			for i, r := range tt.readers {
				readers[i] = memberOf{owned: map[string][]int32{"t": r.owned}, generation: r.gen}
				load[i] = r.load
			}
			got := balanceTopic(tt.n, readers, load, "t")
			if len(tt.want) == 0 {
				assert.Empty(t, got)
				return
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

// joined is a member of a JoinGroup response that reads topics, owns
// owned at generation gen, and asks for balancer b.
func joined(t *testing.T, b kgo.GroupBalancer, id string, topics []string, owned map[string][]int32, gen int32) kmsg.JoinGroupResponseMember {
	t.Helper()
	m := kmsg.NewJoinGroupResponseMember()
	m.MemberID = id
	m.ProtocolMetadata = b.JoinGroupMetadata(topics, owned, gen)
	return m
}

func balance(t *testing.T, members []kmsg.JoinGroupResponseMember, topics map[string]int32) map[string]map[string][]int32 {
	t.Helper()
	mb, interests, err := PerTopicBalancer().MemberBalancer(members)
	require.NoError(t, err)
	for topic := range topics {
		assert.Contains(t, interests, topic)
	}
	return plan(t, mb, topics)
}

func plan(t *testing.T, mb kgo.GroupMemberBalancer, topics map[string]int32) map[string]map[string][]int32 {
	t.Helper()
	withErr, ok := mb.(kgo.GroupMemberBalancerOrError)
	require.True(t, ok)
	into, err := withErr.BalanceOrError(topics)
	require.NoError(t, err)
	p, ok := into.(*kgo.BalancePlan)
	require.True(t, ok)
	return p.AsMemberIDMap()
}

// TestPerTopicBalancerSharesEveryTopic: two runners reading the three
// priority topics and a directed topic each get half of every priority
// topic, also when one of them started first and owns them all. kgo's
// cooperative-sticky balancer, which the runners used before, balances the
// sum over the topics and, in that case, leaves one of them a whole topic.
func TestPerTopicBalancerSharesEveryTopic(t *testing.T) {
	t.Parallel()
	prio := []string{"runs.default", "runs.high", "runs.low"}
	topics := map[string]int32{"runs.default": 16, "runs.high": 16, "runs.low": 16, "runs.direct.a": 1, "runs.direct.b": 1}
	all := []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	ownsAll := map[string][]int32{"runs.default": all, "runs.high": all, "runs.low": all, "runs.direct.a": {0}}
	group := func(b kgo.GroupBalancer, aOwns map[string][]int32) []kmsg.JoinGroupResponseMember {
		return []kmsg.JoinGroupResponseMember{
			joined(t, b, "a", append([]string{"runs.direct.a"}, prio...), aOwns, 1),
			joined(t, b, "b", append([]string{"runs.direct.b"}, prio...), nil, -1),
		}
	}
	b := PerTopicBalancer()
	for _, start := range []map[string][]int32{nil, ownsAll} {
		got := balance(t, group(b, start), topics)
		for _, topic := range prio {
			assert.Len(t, got["a"][topic], 8, "a's share of %s (a owned %v)", topic, start)
		}
		if start == nil {
			for _, topic := range prio {
				assert.Len(t, got["b"][topic], 8, "b's share of %s", topic)
			}
		}
		assert.Equal(t, []int32{0}, got["b"]["runs.direct.b"], "b's directed topic")
	}

	// What cooperative-sticky makes of a owning all, for the record.
	sticky := kgo.CooperativeStickyBalancer()
	mb, _, err := sticky.MemberBalancer(group(sticky, ownsAll))
	require.NoError(t, err)
	old := plan(t, mb, topics)
	t.Logf("cooperative-sticky keeps a at %d/%d/%d of default/high/low", len(old["a"]["runs.default"]), len(old["a"]["runs.high"]), len(old["a"]["runs.low"]))
}

// TestPerTopicBalancerIsCooperative: a member joining a group takes its
// share in two rounds: first the owner keeps what stays and gives up
// nothing it is still assigned, then the freed partitions go to the newcomer.
func TestPerTopicBalancerIsCooperative(t *testing.T) {
	t.Parallel()
	b := PerTopicBalancer()
	topics := map[string]int32{"t": 4}
	first := balance(t, []kmsg.JoinGroupResponseMember{
		joined(t, b, "a", []string{"t"}, map[string][]int32{"t": {0, 1, 2, 3}}, 1),
		joined(t, b, "b", []string{"t"}, nil, -1),
	}, topics)
	assert.Equal(t, []int32{0, 1}, first["a"]["t"], "the owner keeps its share")
	assert.Empty(t, first["b"]["t"], "the partitions moving are not assigned while their owner still holds them")

	second := balance(t, []kmsg.JoinGroupResponseMember{
		joined(t, b, "a", []string{"t"}, map[string][]int32{"t": {0, 1}}, 2),
		joined(t, b, "b", []string{"t"}, nil, 2),
	}, topics)
	assert.Equal(t, []int32{0, 1}, second["a"]["t"])
	assert.Equal(t, []int32{2, 3}, second["b"]["t"], "once revoked, they move")
}

// TestPerTopicBalancerSpreadsSmallTopics: topics of fewer partitions than
// members do not all go to the first member.
func TestPerTopicBalancerSpreadsSmallTopics(t *testing.T) {
	t.Parallel()
	b := PerTopicBalancer()
	topics := map[string]int32{}
	var names []string
	for i := range 6 {
		name := string(rune('a'+i)) + ".jobs"
		topics[name] = 1
		names = append(names, name)
	}
	got := balance(t, []kmsg.JoinGroupResponseMember{
		joined(t, b, "x", names, nil, -1), joined(t, b, "y", names, nil, -1), joined(t, b, "z", names, nil, -1),
	}, topics)
	for _, m := range []string{"x", "y", "z"} {
		assert.Len(t, got[m], 2, "%s's topics", m)
	}
}
