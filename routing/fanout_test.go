package routing_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/routing"
)

func TestBroadcastPlansOneChildPerMember(t *testing.T) {
	t.Parallel()
	got := routing.Broadcast("j@1", []string{"c", "a", "b", "a"})
	assert.Equal(t, []routing.Child{
		{RunID: "j@1/m/a", Index: 0, Count: 3, Member: "a"},
		{RunID: "j@1/m/b", Index: 1, Count: 3, Member: "b"},
		{RunID: "j@1/m/c", Index: 2, Count: 3, Member: "c"},
	}, got)
	assert.Equal(t, got, routing.Broadcast("j@1", []string{"b", "c", "a"}), "the plan does not depend on the members' order")
	assert.Empty(t, routing.Broadcast("j@1", nil))
}

func TestShardGivesEveryShardOnceInTurn(t *testing.T) {
	t.Parallel()
	p := routing.NewPicker(rand.NewPCG(1, 2))
	got := p.Shard("p", "j@1", 5, members(1, 1, 1))
	per := map[string]int{}
	for i, c := range got {
		assert.Equal(t, routing.ShardID("j@1", i), c.RunID)
		assert.Equal(t, i, c.Index)
		assert.Equal(t, 5, c.Count)
		per[c.Member]++
	}
	assert.Len(t, got, 5)
	assert.Equal(t, map[string]int{"a": 2, "b": 2, "c": 1}, per)

	again := p.Shard("p", "j@1", 5, members(1, 1, 1))
	for i := range again {
		assert.Equal(t, got[i].RunID, again[i].RunID, "a redelivery plans the same child ids")
	}
	assert.Nil(t, p.Shard("p", "j@1", 5, nil))
	assert.Nil(t, p.Shard("p", "j@1", 0, members(1)))
}

func TestChildRouting(t *testing.T) {
	t.Parallel()
	p := routing.NewPicker(rand.NewPCG(1, 2))
	child := &sundialv1.Run{RunId: "j@1/s/0", BaseRunId: "j@1", RoutedTo: "b"}
	assert.Equal(t, routing.Decision{Outcome: routing.Chosen, Member: "b"}, p.Pick("p", routing.ChildRouting(child), members(1, 1, 1)))
	child.RoutedTo = "gone"
	got := counts(p, routing.ChildRouting(child), members(1, 1), 4)
	assert.Equal(t, map[string]int{"a": 2, "c": 2}, got, "a child whose member left goes to the live ones in turn")
	child.RoutedTo = ""
	assert.Equal(t, routing.Chosen, p.Pick("p", routing.ChildRouting(child), members(1)).Outcome)
	assert.True(t, routing.FansOut(&sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_SHARDED}))
	assert.True(t, routing.FansOut(&sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_BROADCAST}))
	assert.False(t, routing.FansOut(&sundialv1.Routing{Strategy: sundialv1.RoutingStrategy_ROUTING_STRATEGY_FIXED}))
}
