package charttest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pendingFlags are the flags the chart uses that the secure-connection and
// config-file work adds to every command that talks to a backend (issue 15,
// items 1 and 3), and pendingCommands the commands that are being added.
// While the binary lacks one, the test accepts it and logs it; once the
// binary has it, the test checks it like any other and logs that the entry
// can go.
var (
	pendingFlags    = map[string]bool{}
	pendingCommands = map[string]bool{}
)

var flagLine = regexp.MustCompile(`^\s+--([a-z0-9-]+)`)

// commandFlags returns the flags of `sundial <args> --help`, or false when
// the binary has no such command.
func commandFlags(t *testing.T, bin string, args []string) (map[string]bool, bool) {
	t.Helper()
	out, err := exec.Command(bin, append(append([]string{}, args...), "--help")...).CombinedOutput()
	if strings.Contains(string(out), "No help topic for") {
		return nil, false
	}
	require.NoError(t, err, "%s --help: %s", strings.Join(args, " "), out)
	require.Contains(t, string(out), "sundial "+strings.Join(args, " ")+" [options]", "the help of another command")
	flags := map[string]bool{}
	for _, l := range strings.Split(string(out), "\n") {
		if m := flagLine.FindStringSubmatch(l); m != nil {
			flags[m[1]] = true
		}
	}
	return flags, true
}

// flagOfEnv is the flag an environment variable sets (SUNDIAL_FOO_BAR: foo-bar).
func flagOfEnv(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "SUNDIAL_")
	return strings.ToLower(strings.ReplaceAll(rest, "_", "-")), ok
}

// TestConfigKeysAreFlags builds the sundial binary of this repository and
// checks that every key of every config file the chart renders, and every
// SUNDIAL_* variable it sets, is a flag of the command the pod runs: a key a
// command does not know fails it at start-up.
func TestConfigKeysAreFlags(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "sundial")
	build := exec.Command("go", "build", "-o", bin, "./cmd/sundial")
	build.Dir = "../../.."
	build.Env = os.Environ()
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	pendingSeen := map[string]bool{}
	for _, files := range [][]string{nil, {"values-secured.yaml"}} {
		objs := render(t, files)
		for _, w := range workloads(objs) {
			c := w.pod.Spec.Containers[0]
			flags, ok := commandFlags(t, bin, c.Args)
			if !ok {
				if assert.True(t, pendingCommands[strings.Join(c.Args, " ")], "%s runs sundial %v, which does not exist", w.name, c.Args) {
					pendingSeen["command "+strings.Join(c.Args, " ")] = true
				}
				continue
			}
			var keys []string
			for k := range configOf(t, objs, w) {
				keys = append(keys, k)
			}
			for _, e := range c.Env {
				if f, ok := flagOfEnv(e.Name); ok {
					keys = append(keys, f)
				}
			}
			for _, k := range keys {
				switch {
				case flags[k]:
					if pendingFlags[k] {
						t.Logf("sundial %v has --%s now: remove it from pendingFlags", c.Args, k)
					}
				case pendingFlags[k]:
					pendingSeen["--"+k] = true
				default:
					t.Errorf("%s (%v): --%s is not a flag of sundial %s", w.name, files, k, strings.Join(c.Args, " "))
				}
			}
		}
	}
	for k := range pendingSeen {
		t.Logf("not in this binary yet, accepted as pending: %s", k)
	}
}
