package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/internal/testenv"
)

// quickstartWait bounds each step: the first builds Sundial, on a busy
// machine.
const quickstartWait = 10 * time.Minute

// docBlock returns the fenced block that follows marker in doc.
func docBlock(t *testing.T, doc, marker string) string {
	t.Helper()
	_, after, ok := strings.Cut(doc, marker)
	require.True(t, ok, "docs/workers.md has no %q", marker)
	_, after, ok = strings.Cut(after, "```")
	require.True(t, ok)
	_, body, ok := strings.Cut(after, "\n") // the fence's language
	require.True(t, ok)
	body, _, ok = strings.Cut(body, "```")
	require.True(t, ok)
	return body
}

// start starts line with bash in dir, in a process group of its own that
// the test kills at its end.
func start(t *testing.T, dir, line string, env []string, out io.Writer) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", line)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	return cmd
}

// fired is the line the function logs, with its run's id.
var fired = regexp.MustCompile(`msg="hello from my function" run_id=(\S+)`)

// devExport is the line `sundial dev` prints for a team's worker.
var devExport = regexp.MustCompile(`a worker or the jobs of team dev:\n\s*(export SUNDIAL_API_URL=\S+ SUNDIAL_API_TOKEN=\S+)\n`)

// TestQuickstartFromAnEmptyDirectory runs docs/workers.md's quickstart as
// a new user would: its commands, read from the doc, in a fresh empty
// directory beside the checkout (a link named sundial), with the doc's
// main.go, which must be examples/teamworker/main.go; it passes when the
// function has fired twice. The one liberty: `sundial dev` listens on a
// free port (SUNDIAL_LISTEN), and the second command is the line it
// printed, as the doc says.
func TestQuickstartFromAnEmptyDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Sundial and a module of its own, and waits for two firings")
	}
	raw, err := os.ReadFile("../../docs/workers.md")
	require.NoError(t, err)
	doc := string(raw)
	mainGo, err := os.ReadFile("main.go")
	require.NoError(t, err)
	require.Equal(t, string(mainGo), docBlock(t, doc, "<!-- quickstart: main.go"), "docs/workers.md's main.go is not examples/teamworker/main.go")
	var lines []string
	for l := range strings.SplitSeq(strings.TrimSpace(docBlock(t, doc, "<!-- quickstart: commands")), "\n") {
		lines = append(lines, l)
	}
	require.LessOrEqual(t, len(lines), 5, "the quickstart promises five commands at most")
	require.True(t, strings.HasPrefix(lines[1], "export SUNDIAL_API_URL="), "the second command is the line sundial dev prints: %q", lines[1])

	checkout, err := filepath.Abs("../..")
	require.NoError(t, err)
	root := t.TempDir()
	require.NoError(t, os.Symlink(checkout, filepath.Join(root, "sundial")))
	dir := filepath.Join(root, "hello")
	require.NoError(t, os.Mkdir(dir, 0o755))
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SUNDIAL_") && !strings.HasPrefix(kv, "GOWORK=") {
			env = append(env, kv)
		}
	}

	dev := &testenv.SyncBuffer{}
	start(t, dir, lines[0], append(env, "SUNDIAL_LISTEN=127.0.0.1:0"), dev)
	var export string
	require.Eventually(t, func() bool {
		m := devExport.FindStringSubmatch(dev.String())
		if m != nil {
			export = m[1]
		}
		return m != nil
	}, quickstartWait, 100*time.Millisecond, "sundial dev never printed the team's line:\n%s", dev.String())

	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), mainGo, 0o644))
	user := &testenv.SyncBuffer{}
	script := strings.Join(append([]string{export}, lines[2:]...), "\n")
	start(t, dir, script, env, user)
	require.Eventually(t, func() bool {
		return strings.Count(user.String(), "hello from my function") >= 2
	}, quickstartWait, 200*time.Millisecond, "the function never fired twice; the user's shell:\n%s\nsundial dev:\n%s", user.String(), dev.String())
	ids := map[string]int{}
	for _, m := range fired.FindAllStringSubmatch(user.String(), -1) {
		ids[m[1]]++
	}
	require.GreaterOrEqual(t, len(ids), 2, "the function's lines name no run")
	for id, n := range ids {
		require.Equal(t, 1, n, "run %s fired %d times", id, n)
	}
}
