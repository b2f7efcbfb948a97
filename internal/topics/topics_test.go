package topics_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/internal/topics"
)

func TestNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		prefix string
		got    func(topics.Names) string
		want   string
	}{
		{"", topics.Names.Jobs, "sundial.jobs"},
		{"", topics.Names.JobsStatus, "sundial.jobs.status"},
		{"", topics.Names.Triggers, "sundial.triggers"},
		{"", func(n topics.Names) string { return n.Runs(topics.PriorityHigh) }, "sundial.runs.high"},
		{"", func(n topics.Names) string { return n.Runs(topics.PriorityDefault) }, "sundial.runs.default"},
		{"", func(n topics.Names) string { return n.Runs(topics.PriorityLow) }, "sundial.runs.low"},
		{"", topics.Names.Events, "sundial.events"},
		{"", topics.Names.DLQ, "sundial.dlq"},
		{"", topics.Names.Shards, "sundial.shards"},
		{"", topics.Names.Executors, "sundial.executors"},
		{"t-x.", topics.Names.Jobs, "t-x.sundial.jobs"},
		{"t-x.", topics.Names.Shards, "t-x.sundial.shards"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.got(topics.Names{Prefix: tt.prefix}))
	}
	assert.Equal(t, []string{"p.sundial.runs.high", "p.sundial.runs.default", "p.sundial.runs.low"}, topics.Names{Prefix: "p."}.AllRuns())
	assert.Panics(t, func() { topics.Names{}.Runs("urgent") })
}

func TestSpecs(t *testing.T) {
	t.Parallel()
	specs, err := topics.Names{Prefix: "p."}.Specs(128)
	require.NoError(t, err)
	byName := map[string]topics.Spec{}
	for _, s := range specs {
		require.NotContains(t, byName, s.Name, "duplicate topic")
		byName[s.Name] = s
	}
	want := map[string]int32{
		"p.sundial.jobs": 16, "p.sundial.jobs.status": 4, "p.sundial.triggers": 8,
		"p.sundial.runs.high": 16, "p.sundial.runs.default": 16, "p.sundial.runs.low": 16,
		"p.sundial.events": 16, "p.sundial.dlq": 4, "p.sundial.shards": 128,
		"p.sundial.executors": 4,
		"p.sundial.audit":     4,
	}
	require.Len(t, byName, len(want))
	for name, partitions := range want {
		assert.Equal(t, partitions, byName[name].Partitions, name)
	}
	assert.Equal(t, "compact", byName["p.sundial.jobs"].Configs["cleanup.policy"], "definitions are kept")
	assert.Equal(t, "compact", byName["p.sundial.jobs.status"].Configs["cleanup.policy"])
	assert.Equal(t, "604800000", byName["p.sundial.events"].Configs["retention.ms"])
	assert.True(t, byName["p.sundial.shards"].PerShard)
	assert.Equal(t, "compact", byName["p.sundial.executors"].Configs["cleanup.policy"], "the newest announcement of every executor is kept")

	for _, bad := range []int{0, -1} {
		_, err := topics.Names{}.Specs(bad)
		assert.ErrorContains(t, err, "shards")
	}
}

func TestDefaultGroupsFollowThePrefix(t *testing.T) {
	t.Parallel()
	tests := []struct{ prefix, base, want string }{
		{"", "sundial-registry", "sundial-registry"},
		{"redteam.", "sundial-registry", "redteam.sundial-registry"},
		{"prod.", "sundial-runners-billing", "prod.sundial-runners-billing"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, topics.Names{Prefix: tt.prefix}.Group(tt.base))
	}

	bases := []string{"sundial-registry", "sundial-triggers", "sundial-runners", "sundial-dispatchers", "sundial-history", "sundial-dagengine", "sundial-dagengine-definitions"}
	a, b := map[string]bool{}, map[string]bool{}
	for _, base := range bases {
		a[topics.Names{Prefix: "one."}.Group(base)] = true
		b[topics.Names{Prefix: "two."}.Group(base)] = true
	}
	for g := range a {
		assert.False(t, b[g], "two installations share the group %s", g)
	}
}
