package bench

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestPeakPerSecond: the most starts within one second of each other.
func TestPeakPerSecond(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		starts []int64
		want   int
	}{
		{"none", nil, 0},
		{"one", []int64{5}, 1},
		{"a burst inside one second", []int64{0, 10, 999, 2500}, 3},
		{"a second apart is not one second", []int64{0, 1000, 2000}, 1},
		{"the densest second is found later", []int64{0, 3000, 3100, 3200, 3999}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, peakPerSecond(tt.starts))
		})
	}
}
