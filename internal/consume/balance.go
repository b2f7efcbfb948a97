package consume

import (
	"cmp"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Balancers is the group balancers of every consumer group of Sundial that
// reads more than one topic: PerTopicBalancer first, then kgo's
// cooperative-sticky one, which the groups used before, so a group that
// still has members of an older release goes on with it until they are
// all replaced (both are cooperative, so the switch is safe).
func Balancers() kgo.Opt {
	return kgo.Balancers(PerTopicBalancer(), kgo.CooperativeStickyBalancer())
}

// PerTopicBalancer balances every topic on its own among the members that
// read it: each gets its partitions' count divided by theirs, rounded up
// or down, and keeps as many of those it owns as it may (sticky); it is
// cooperative (kgo.BalancePlan.AdjustCooperative: a partition that moves
// is first revoked, then assigned in the next round).
//
// Why not cooperative-sticky alone: it balances the sum over all topics.
// A runner reads the three priority topics of 16 partitions each, and two
// runners were given 16 + 8 + 1 partitions each, one of them all of
// sundial.runs.default and the other all of sundial.runs.high: every run of
// the default priority, nearly all of them, went to one runner, and killing
// it stopped them all (crash bench of 30 November 2026).
func PerTopicBalancer() kgo.GroupBalancer { return perTopicBalancer{} }

type perTopicBalancer struct{}

func (perTopicBalancer) ProtocolName() string { return "sundial-per-topic" }

func (perTopicBalancer) IsCooperative() bool { return true }

func (perTopicBalancer) JoinGroupMetadata(interests []string, current map[string][]int32, generation int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 3
	meta.Topics = interests
	meta.Generation = generation
	for _, topic := range slices.Sorted(maps.Keys(current)) {
		owned := kmsg.NewConsumerMemberMetadataOwnedPartition()
		owned.Topic = topic
		owned.Partitions = slices.Sorted(slices.Values(current[topic]))
		meta.OwnedPartitions = append(meta.OwnedPartitions, owned)
	}
	return meta.AppendTo(nil)
}

func (perTopicBalancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	return kgo.ParseConsumerSyncAssignment(assignment)
}

func (p perTopicBalancer) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	b, err := kgo.NewConsumerBalancer(p, members)
	if err != nil {
		return nil, nil, err
	}
	return b, b.MemberTopics(), nil
}

// memberOf is a member of the group as the balance sees it.
type memberOf struct {
	m     *kmsg.JoinGroupResponseMember
	topic map[string]bool
	// owned: the partitions it claims, by topic, at the generation it
	// claims them at.
	owned      map[string][]int32
	generation int32
}

func (perTopicBalancer) Balance(b *kgo.ConsumerBalancer, topics map[string]int32) kgo.IntoSyncAssignment {
	var members []memberOf
	b.EachMember(func(m *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		mo := memberOf{m: m, topic: map[string]bool{}, owned: map[string][]int32{}, generation: meta.Generation}
		for _, t := range meta.Topics {
			mo.topic[t] = true
		}
		for _, o := range meta.OwnedPartitions {
			mo.owned[o.Topic] = append(mo.owned[o.Topic], o.Partitions...)
		}
		members = append(members, mo)
	})
	plan := b.NewPlan()
	load := make([]int, len(members)) // partitions planned so far, by member
	for _, topic := range slices.Sorted(maps.Keys(topics)) {
		var readers []memberOf
		var at []int // readers[i] is members[at[i]]
		for i, m := range members {
			if m.topic[topic] {
				readers = append(readers, m)
				at = append(at, i)
			}
		}
		loads := make([]int, len(readers))
		for i := range readers {
			loads[i] = load[at[i]]
		}
		for i, parts := range balanceTopic(topics[topic], readers, loads, topic) {
			if len(parts) > 0 {
				plan.AddPartitions(readers[i].m, topic, parts)
				load[at[i]] += len(parts)
			}
		}
	}
	plan.AdjustCooperative(b)
	return plan
}

// balanceTopic shares the partitions 0..n-1 of topic among readers (in the
// group's order: by instance id, then member id), whose load is what the
// topics balanced before gave them. Each reader gets n/k or n/k+1 of them;
// the larger shares go to the readers that own the most already, then to
// the least loaded (so many topics of few partitions do not all go to the
// first reader), then in order. A reader keeps the partitions it owns, up to its
// share, the lowest first; a partition claimed by two readers belongs to
// the one claiming it at the later generation (the other missed a
// rebalance), or to the first in order. What is left goes, lowest first,
// to the readers below their share, in order.
func balanceTopic(n int32, readers []memberOf, load []int, topic string) [][]int32 {
	k := len(readers)
	out := make([][]int32, k)
	if k == 0 || n <= 0 {
		return out
	}
	owner := make([]int, n)
	for p := range owner {
		owner[p] = -1
	}
	for i, r := range readers {
		for _, p := range r.owned[topic] {
			if p < 0 || p >= n {
				continue
			}
			if o := owner[p]; o < 0 || r.generation > readers[o].generation {
				owner[p] = i
			}
		}
	}
	owns := make([]int, k)
	for _, o := range owner {
		if o >= 0 {
			owns[o]++
		}
	}
	byOwned := make([]int, k)
	for i := range byOwned {
		byOwned[i] = i
	}
	slices.SortStableFunc(byOwned, func(a, b int) int {
		return cmp.Or(cmp.Compare(owns[b], owns[a]), cmp.Compare(load[a], load[b]))
	})
	share := make([]int, k)
	for rank, i := range byOwned {
		share[i] = int(n) / k
		if rank < int(n)%k {
			share[i]++
		}
	}
	var free []int32
	for p := range n {
		if o := owner[p]; o >= 0 && len(out[o]) < share[o] {
			out[o] = append(out[o], p)
		} else {
			free = append(free, p)
		}
	}
	for i := range out {
		for len(out[i]) < share[i] {
			out[i] = append(out[i], free[0])
			free = free[1:]
		}
		slices.Sort(out[i])
	}
	return out
}
