package telemetry_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/internal/telemetry"
)

func TestShardsCheck(t *testing.T) {
	t.Parallel()
	var owned []int
	check := telemetry.ShardsCheck(func() []int { return owned })
	assert.ErrorIs(t, check(t.Context()), telemetry.ErrNoShards)
	owned = []int{3, 4}
	require.NoError(t, check(t.Context()))
}
