package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hogChildEnv makes the test binary run RunHog instead of the tests, so
// that TestHog can start a real hog process.
const hogChildEnv = "SUNDIAL_BENCH_TEST_HOG_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(hogChildEnv) == "1" {
		if err := RunHog(context.Background(), os.Stdin); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// cpuTicks is the user+system CPU time of pid in clock ticks.
func cpuTicks(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	// The fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, err := strconv.Atoi(f[11])
	require.NoError(t, err)
	stime, err := strconv.Atoi(f[12])
	require.NoError(t, err)
	return utime + stime
}

func TestHog(t *testing.T) {
	t.Setenv(hogChildEnv, "1")
	h := &Hog{Command: []string{os.Args[0]}}
	h.Stop() // safe before Start
	require.NoError(t, h.Start(context.Background()))
	pid := h.PID()
	require.NotZero(t, pid)

	// The child spins: its CPU time keeps growing. 50 ticks is half a
	// second of CPU at the usual 100 Hz, far more than starting a process
	// costs.
	for cpuTicks(t, pid) < 50 {
		exited, err := h.Exited()
		require.False(t, exited, "the hog exited early: %v", err)
		time.Sleep(50 * time.Millisecond)
	}

	h.Stop()
	exited, err := h.Exited()
	assert.True(t, exited, "Stop returns once the hog has exited")
	assert.NoError(t, err, "the hog ends cleanly when its stdin closes")
	h.Stop() // idempotent
}

func TestHogNeedsCommand(t *testing.T) {
	t.Parallel()
	assert.ErrorContains(t, (&Hog{}).Start(context.Background()), "hog command: empty")
}
