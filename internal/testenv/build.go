package testenv

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// sundialCommand is the import path of the sundial binary, which builds
// from any directory of the module.
const sundialCommand = "github.com/sundialhq/sundial/cmd/sundial"

// BuildSundial builds the sundial command into the test's temporary
// directory and returns the binary's path, for a test that runs its
// commands as processes. A build that fails fails the test, with the go
// command's output.
func BuildSundial(t testing.TB) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command builds the sundial command: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "sundial")
	out, err := exec.CommandContext(t.Context(), goTool, "build", "-o", bin, sundialCommand).CombinedOutput()
	if err != nil {
		t.Fatalf("go build %s: %v\n%s", sundialCommand, err, out)
	}
	return bin
}
