package bench

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMedianAndSpread(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		values   []float64
		median   float64
		relative float64
	}{
		{"three", []float64{3000, 4500, 3500}, 3500, 1500.0 / 3500},
		{"equal", []float64{10, 10, 10}, 10, 0},
		{"even count takes the lower middle", []float64{4, 1, 3, 2}, 2, 3.0 / 2},
		{"one", []float64{7}, 7, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, s, err := median(c.values, func(v float64) float64 { return v })
			require.NoError(t, err)
			assert.InDelta(t, c.median, m, 1e-9)
			assert.Equal(t, c.values, s.Samples, "the samples in the order measured")
			assert.InDelta(t, c.relative, s.Relative, 1e-9)
		})
	}
}

// The warm-up is measured and discarded until two of its measurements in
// a row settle; the three measurements that follow give the median and
// the spread; an error stops at once.
func TestMeasureStableDiscardsTheWarmUp(t *testing.T) {
	t.Parallel()
	var calls []time.Duration
	// A JVM compiling its hot paths: 100, then 2000 (not within 10%), then
	// 2100 (within 10% of 2000): warm after three.
	values := []float64{100, 2000, 2100, 3000, 3400, 3200}
	got, s, err := measureStable(t.Context(), 10*time.Second, func(_ context.Context, d time.Duration) (float64, error) {
		calls = append(calls, d)
		return values[len(calls)-1], nil
	}, func(v float64) float64 { return v })
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{5 * time.Second, 5 * time.Second, 5 * time.Second, 10 * time.Second, 10 * time.Second, 10 * time.Second}, calls)
	assert.InDelta(t, 3200, got, 1e-9)
	assert.Equal(t, []float64{3000, 3400, 3200}, s.Samples)
	assert.Equal(t, []float64{100, 2000, 2100}, s.Warmup)
	assert.True(t, s.Settled)

	boom := errors.New("broker gone")
	_, _, err = measureStable(t.Context(), time.Second, func(context.Context, time.Duration) (float64, error) { return 0, boom },
		func(v float64) float64 { return v })
	assert.ErrorIs(t, err, boom)
}

// A warm-up that never settles stops after WarmupRounds and says so.
func TestMeasureStableBoundsTheWarmUp(t *testing.T) {
	t.Parallel()
	n := 0
	_, s, err := measureStable(t.Context(), time.Second, func(context.Context, time.Duration) (float64, error) {
		n++
		return float64(n * 1000), nil // each 2x, 1.5x, ... the one before: only settles past 10 rounds
	}, func(v float64) float64 { return v })
	require.NoError(t, err)
	assert.Len(t, s.Warmup, WarmupRounds)
	assert.False(t, s.Settled)
	assert.Equal(t, WarmupRounds+BaselineSamples, n)
}

func TestWarm(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		values []float64
		want   bool
	}{
		{"none", nil, false},
		{"one", []float64{5000}, false},
		{"rising fast", []float64{1300, 2000}, false},
		{"within 10% rising", []float64{4500, 4950}, true},
		{"within 10% falling", []float64{5000, 4600}, true},
		{"just over 10%", []float64{4000, 4500}, false},
		{"only the last two count", []float64{100, 4000, 4100}, true},
		{"zero never settles", []float64{0, 0}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, warm(c.values))
		})
	}
}
