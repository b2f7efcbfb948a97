package runner

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestPauseChange: a topic or partition pauses at its bound and resumes at
// half of it, so that it does not flap around the bound.
func TestPauseChange(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		paused bool
		n      int
		want   pauseStep
	}{
		{"fetching, below the bound", false, 9, keepAsIs},
		{"fetching, at the bound: paused", false, 10, pauseNow},
		{"fetching, over the bound (one poll's overshoot): paused", false, 17, pauseNow},
		{"paused, above half: stays paused", true, 6, keepAsIs},
		{"paused, at half: resumed", true, 5, resumeNow},
		{"paused, empty: resumed", true, 0, resumeNow},
		{"fetching, at half: fetching", false, 5, keepAsIs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, pauseChange(tt.paused, tt.n, 10))
		})
	}
}
