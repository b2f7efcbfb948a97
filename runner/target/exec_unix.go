//go:build unix

package target

import (
	"os/exec"
	"syscall"
)

// ownGroup makes cmd the leader of a process group of its own, and its
// cancellation kill the whole group: a command's children (a shell's
// pipeline, a daemonized helper) end with it instead of running on after
// the run was cancelled or timed out.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
