package main

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// envRunMain makes the test binary run main instead of the tests, so a test
// can start the real command in a child process and signal it.
const envRunMain = "SUNDIAL_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envRunMain) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// startSundial starts the command in a child process with the given
// arguments. It returns the process, its stdout, and its stderr, which is a
// file the test may read once the process has exited.
func startSundial(t *testing.T, stdin *os.File, args ...string) (*exec.Cmd, *bufio.Reader, func() string) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), envRunMain+"=1")
	cmd.Stdin = stdin
	stderrPath := filepath.Join(t.TempDir(), "stderr")
	stderr, err := os.Create(stderrPath)
	require.NoError(t, err)
	defer stderr.Close()
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	readStderr := func() string {
		data, err := os.ReadFile(stderrPath)
		require.NoError(t, err)
		return string(data)
	}
	return cmd, bufio.NewReader(stdout), readStderr
}

// TestPreviewStopsOnSIGINT starts a preview that would print a billion fire
// times, waits until it is printing, interrupts it, and checks that it stops
// by itself and says why.
func TestPreviewStopsOnSIGINT(t *testing.T) {
	t.Parallel()
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			cmd, stdout, stderr := startSundial(t, nil, "schedule", "preview", "* * * * * *", "-n", "1000000000", "--from", "2026-01-01T00:00:00Z")
			line, err := stdout.ReadString('\n')
			require.NoError(t, err)
			assert.Contains(t, line, "2026-01-01T00:00:01Z")

			require.NoError(t, cmd.Process.Signal(sig))
			drained := make(chan error, 1)
			go func() {
				_, err := io.Copy(io.Discard, stdout)
				drained <- err
			}()
			require.NoError(t, <-drained)
			err = cmd.Wait()
			var exit *exec.ExitError
			require.True(t, errors.As(err, &exit), "the command exits with an error, got %v", err)
			ws, ok := exit.Sys().(syscall.WaitStatus)
			require.True(t, ok)
			assert.False(t, ws.Signaled(), "the command stops by itself rather than being killed by %s", ws.Signal())
			errOut := stderr()
			assert.Equal(t, 1, exit.ExitCode(), "stderr: %s", errOut)
			assert.Contains(t, errOut, "preview stopped after")
			assert.Contains(t, errOut, "signal received")
		})
	}
}

// TestSecondSIGINTEndsABlockedCommand runs a command blocked in a read that
// does not watch its context (a DAG definition on a stdin that never ends):
// the first SIGINT cancels the context, and a second one must end the
// process. SIGINT is sent again until the process is gone, because the test
// cannot see when the first one has been handled.
func TestSecondSIGINTEndsABlockedCommand(t *testing.T) {
	t.Parallel()
	// An *os.File, so the child reads the pipe itself and Wait has no copy
	// to wait for.
	stdinR, stdinW, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { _ = stdinW.Close() })
	cmd, stdout, _ := startSundial(t, stdinR, "dag", "validate", "-")
	require.NoError(t, stdinR.Close())
	exited := make(chan error, 1)
	go func() {
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	resend := time.NewTicker(100 * time.Millisecond)
	defer resend.Stop()
	sent := 0
wait:
	for {
		require.NoError(t, cmd.Process.Signal(os.Interrupt))
		sent++
		select {
		case err = <-exited:
			break wait
		case <-resend.C:
		}
	}
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "got %v", err)
	ws, ok := exit.Sys().(syscall.WaitStatus)
	require.True(t, ok)
	assert.True(t, ws.Signaled() && ws.Signal() == syscall.SIGINT, "ended by SIGINT after %d signals: %v", sent, err)
}
