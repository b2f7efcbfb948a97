package promcheck

import "syscall"

// dieWithParent makes the child receive SIGKILL when the process that
// started it dies.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
