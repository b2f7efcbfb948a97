//go:build unix

package target

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// Cancelling an exec run kills the command's children too: a script that
// starts a long child and waits for it leaves nothing running once the
// run is cancelled. Before, the child ran on after the command died.
func TestCancelledExecLeavesNoChildRunning(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	script := filepath.Join(dir, "spawn.sh")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\nsleep 300 &\necho $! > "+pidFile+"\nwait\n"), 0o755))
	e, err := NewExec(ExecConfig{Allowed: map[string]string{"spawn": script}})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- e.Execute(ctx, Request{Run: &sundialv1.Run{RunId: "j@1", JobId: "j"}}, &sundialv1.ExecTarget{Command: "spawn"})
	}()
	var pid int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	}, 2*time.Minute, 20*time.Millisecond, "the script started its child")
	cancel()
	err = <-done
	require.Error(t, err)
	assert.Equal(t, CodeCancelled, Classify(err, CodeExecExit).Code)

	// The child is killed with the group; wait for it to be gone (or a
	// zombie about to be reaped by init), however busy the machine is.
	require.Eventually(t, func() bool { return !alive(pid) }, 2*time.Minute, 20*time.Millisecond, "child %d still running", pid)
}

// alive reports whether pid runs and is not a zombie.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b))
	return len(fields) < 3 || fields[2] != "Z"
}
