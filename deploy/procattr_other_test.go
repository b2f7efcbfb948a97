//go:build (observability || secure) && !linux

package deploy_test

import "syscall"

// dieWithParent: only Linux can tie a child's life to the test binary's;
// the cleanups end it elsewhere.
func dieWithParent() *syscall.SysProcAttr { return nil }
