//go:build (observability || secure) && linux

package deploy_test

import "syscall"

// dieWithParent makes a started process receive SIGKILL when the test
// binary dies, even by a timeout that skips the cleanups.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
