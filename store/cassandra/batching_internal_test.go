package cassandra

import (
	"iter"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestEveryNodeReplicates(t *testing.T) {
	t.Parallel()
	simple := func(rf string) map[string]string {
		return map[string]string{"class": "org.apache.cassandra.locator.SimpleStrategy", "replication_factor": rf}
	}
	nts := map[string]string{"class": "org.apache.cassandra.locator.NetworkTopologyStrategy", "dc1": "3", "dc2": "2"}
	for _, tc := range []struct {
		name  string
		nodes map[string]int
		repl  map[string]string
		want  bool
	}{
		{"one node, factor 1", map[string]int{"dc1": 1}, simple("1"), true},
		{"three nodes, factor 3", map[string]int{"dc1": 3}, simple("3"), true},
		{"four nodes, factor 3", map[string]int{"dc1": 4}, simple("3"), false},
		{"two data centres counted together under SimpleStrategy", map[string]int{"dc1": 2, "dc2": 2}, simple("3"), false},
		{"each data centre within its factor", map[string]int{"dc1": 3, "dc2": 2}, nts, true},
		{"one data centre beyond its factor", map[string]int{"dc1": 3, "dc2": 3}, nts, false},
		{"a data centre the keyspace does not replicate to", map[string]int{"dc1": 1, "dc3": 1}, nts, false},
		{"a factor that is not a number", map[string]int{"dc1": 1}, simple("x"), false},
		{"an unknown strategy", map[string]int{"dc1": 1}, map[string]string{"class": "LocalStrategy"}, false},
	} {
		assert.Equal(t, tc.want, everyNodeReplicates(tc.nodes, tc.repl), tc.name)
	}
}

func TestPackGroups(t *testing.T) {
	t.Parallel()
	// A statement is a string; its bytes are its length. split cuts a
	// group into pieces of two.
	split := func(g []string) iter.Seq[[]string] {
		return func(yield func([]string) bool) {
			for i := 0; i < len(g); i += 2 {
				if !yield(g[i:min(i+2, len(g))]) {
					return
				}
			}
		}
	}
	pack := func(maxStmts int, groups ...[]string) [][]string {
		return slices.Collect(packGroups(groups, maxStmts, maxCrossBatchBytes, func(s string) int { return len(s) }, split))
	}
	big := string(make([]byte, maxCrossBatchBytes))

	assert.Empty(t, pack(4))
	assert.Equal(t, [][]string{{"a1", "a2", "b1", "c1"}}, pack(4, []string{"a1", "a2"}, []string{"b1"}, []string{"c1"}),
		"groups share a batch, in order")
	assert.Equal(t, [][]string{{"a1", "a2", "b1"}, {"c1", "c2"}}, pack(4, []string{"a1", "a2"}, []string{"b1"}, []string{"c1", "c2"}),
		"a group that does not fit the batch starts the next one whole")
	assert.Equal(t, [][]string{{"a1"}, {"b1", "b2"}, {"b3", "b4"}, {"b5"}, {"c1"}}, pack(4, []string{"a1"}, []string{"b1", "b2", "b3", "b4", "b5"}, []string{"c1"}),
		"a group over the statement bound goes alone, cut by split")
	assert.Equal(t, [][]string{{"a1"}, {big}, {"c1"}}, pack(4, []string{"a1"}, []string{big}, []string{"c1"}),
		"a statement over the byte bound goes alone")
	half := string(make([]byte, maxCrossBatchBytes/2))
	assert.Equal(t, [][]string{{half}, {half}}, pack(4, []string{half}, []string{half}),
		"the byte bound counts each statement's overhead")
}
