package bench

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestScenarioTable: every scenario a user may name has its type, and the
// table holds no other.
func TestScenarioTable(t *testing.T) {
	names := slices.Sorted(maps.Keys(scenarios))
	want := slices.Clone(Scenarios)
	slices.Sort(want)
	assert.Equal(t, want, names)
	for _, n := range Scenarios {
		assert.NotEqual(t, baseScenario{}, scenarioNamed(n), n)
	}
	assert.Equal(t, baseScenario{}, scenarioNamed("soak"), "an unknown name has no hooks")
}
