package discovery

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/internal/topics"
)

// announcerProcessEnv carries "brokers|topic prefix|id|interval" to the
// test binary started as an executor process.
const announcerProcessEnv = "SUNDIAL_TEST_ANNOUNCER"

// announcerProcessMain announces one executor until SIGTERM or SIGKILL.
func announcerProcessMain(raw string) int {
	f := strings.Split(raw, "|")
	if len(f) != 4 {
		fmt.Fprintf(os.Stderr, "%s: want 4 fields, got %q\n", announcerProcessEnv, raw)
		return 2
	}
	interval, err := time.ParseDuration(f[3])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	a, err := NewAnnouncer(AnnouncerConfig{Kafka: []kgo.Opt{kgo.SeedBrokers(strings.Split(f[0], ",")...)},
		Topics: topics.Names{Prefix: f[1]}, ID: f[2], Pool: "killpool", Capacity: 1, Interval: interval})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := a.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	<-ctx.Done()
	a.Stop()
	return 0
}

// TestKilledExecutorLeavesTheLiveSet starts an executor as a separate OS
// process, kills it with SIGKILL (no tombstone), and waits for it to leave
// the live set: expired, not left, and never before its bound
// (ExpiryFactor × interval after its last heartbeat).
func TestKilledExecutorLeavesTheLiveSet(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	s.startDirectory(t)
	const interval = 200 * time.Millisecond
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), announcerProcessEnv+"="+strings.Join([]string{strings.Join(s.broker, ","), s.names.Prefix, "victim", interval.String()}, "|"))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	waitFor(t, s.dir, "victim live", func() bool { return liveIDs(s.dir, "killpool") == "victim" })

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	<-exited
	killed := time.Now()
	waitFor(t, s.dir, "victim out of the live set", func() bool { return liveIDs(s.dir, "killpool") == "" })
	left := time.Now()
	m, ok := s.dir.Member("victim")
	require.True(t, ok, "still listed, marked")
	assert.Equal(t, Expired, m.State, "no tombstone: it expired (process output: %s)", out.String())
	bound := DefaultExpiryFactor * interval
	assert.GreaterOrEqual(t, left.Sub(m.Heartbeat), bound, "it stayed live for its bound after its last heartbeat")
	t.Logf("left the live set %s after SIGKILL, %s after its last heartbeat (bound %s + tick %s)",
		left.Sub(killed).Round(time.Millisecond), left.Sub(m.Heartbeat).Round(time.Millisecond), bound, s.dir.cfg.Tick)
}
