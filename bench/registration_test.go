package bench

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRegistrationIsProfiled: the registration's watch samples the bench
// process's CPU and profiles it from its start to finish, and the report
// writes the profile beside the window's and a Registration section that
// names the rate, the CPU table and the profile. Not parallel: a process
// has one CPU profile at a time.
func TestRegistrationIsProfiled(t *testing.T) {
	b := &Bench{Now: time.Now}
	w := b.watchRegistration(t.Context(), Config{StackScript: filepath.Join(t.TempDir(), "deploy", "local", "stack.sh")}, nil)
	// Two samples give the bench process an interval.
	require.Eventually(t, func() bool {
		w.cpu.mu.Lock()
		defer w.cpu.mu.Unlock()
		return len(w.cpu.samples) >= 2
	}, time.Minute, 10*time.Millisecond)
	reg := w.finish(1000)
	require.Empty(t, reg.Profile.Error)
	assert.Equal(t, "profiles/bench.registration.cpu.pprof", reg.Profile.File)
	assert.Equal(t, 1000, reg.Definitions)
	assert.False(t, reg.To.Before(reg.From))
	var bench *ProcessCPU
	for i, pc := range reg.CPU.Processes {
		if pc.Name == "bench" {
			bench = &reg.CPU.Processes[i]
		}
	}
	require.NotNil(t, bench, "processes %+v", reg.CPU.Processes)
	assert.Positive(t, bench.Intervals, "the bench process was sampled")

	r := sampleReport()
	r.Systems[0].Registration = reg
	dir := filepath.Join(t.TempDir(), "20260301-120000-steady")
	require.NoError(t, r.Write(dir))
	data, err := os.ReadFile(filepath.Join(dir, "profiles", "bench.registration.cpu.pprof"))
	require.NoError(t, err)
	_, err = profile.ParseData(data)
	require.NoError(t, err, "the registration's profile is a profile")
	md, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	require.NoError(t, err)
	assert.Contains(t, string(md), "## Registration (sundial)")
	assert.Contains(t, string(md), "1000 definitions registered from")
	assert.Contains(t, string(md), "bench CPU profile of the registration: `profiles/bench.registration.cpu.pprof`")
	assert.Contains(t, string(md), "| bench | pipeline |")
}
