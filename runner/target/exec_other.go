//go:build !unix

package target

import "os/exec"

// ownGroup does nothing where process groups do not exist: cancelling
// kills the command itself only.
func ownGroup(*exec.Cmd) {}
