//go:build !linux

package promcheck

import "syscall"

// dieWithParent: only Linux can tie a child's life to its parent's; Stop
// ends it elsewhere.
func dieWithParent() *syscall.SysProcAttr { return nil }
