//go:build observability || secure

package deploy_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/internal/testenv"
)

// The sundial processes the end-to-end tests start: the observability
// scenario and the secured-stack test run the built command, as an operator
// would, rather than its packages.

// sundialBinary returns SUNDIAL_OBSERVE_BINARY, or builds the command.
func sundialBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("SUNDIAL_OBSERVE_BINARY"); bin != "" {
		abs, err := filepath.Abs(bin)
		require.NoError(t, err)
		return abs
	}
	return testenv.BuildSundial(t)
}

// sundialProcess is a long-running sundial command started by the test.
type sundialProcess struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	addr    string // of its telemetry server, once ready
	exited  chan struct{}
	err     error
}

// startSundial starts bin with args, its output in dir/name.log. The
// process is ended at cleanup (SIGTERM, then SIGKILL after a minute), and,
// on Linux, dies with the test binary.
func startSundial(t *testing.T, bin string, env []string, dir, name string, args ...string) *sundialProcess {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	require.NoError(t, err)
	defer func() { _ = f.Close() }() // the child holds its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = dieWithParent()
	require.NoError(t, cmd.Start(), "start %s", name)
	p := &sundialProcess{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() { p.stop(t) })
	t.Logf("%s: pid %d, log %s", name, cmd.Process.Pid, logPath)
	return p
}

// stop ends the process: SIGTERM (and SIGCONT, in case it is stopped), then
// SIGKILL if it has not exited within a minute.
func (p *sundialProcess) stop(t *testing.T) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	select {
	case <-p.exited:
	case <-time.After(time.Minute):
		t.Logf("%s did not exit within a minute of SIGTERM: killing it", p.name)
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	if t.Failed() {
		t.Logf("%s exited (%v); last lines of %s:\n%s", p.name, p.err, p.logPath, tailFile(p.logPath, 40))
	}
}

// exitErr is an error if the process has exited.
func (p *sundialProcess) exitErr() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited: %w; last lines of %s:\n%s", p.name, p.err, p.logPath, tailFile(p.logPath, 20))
	default:
		return nil
	}
}

func (p *sundialProcess) signal(t *testing.T, sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("%s: %v: %w", p.name, sig, err)
	}
	t.Logf("sent %v to %s (pid %d)", sig, p.name, p.cmd.Process.Pid)
	return nil
}

// waitReady reads the telemetry server's address from the process's log
// and waits until its /readyz answers 200.
func (p *sundialProcess) waitReady(t *testing.T, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	for {
		require.NoError(t, p.exitErr())
		if p.addr == "" {
			p.addr = serverAddr(p.logPath)
		}
		if p.addr != "" {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+p.addr+"/readyz", nil)
			require.NoError(t, err)
			resp, err := client.Do(req)
			if err == nil {
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					t.Logf("%s ready, telemetry at %s", p.name, p.addr)
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready within %s (telemetry address %q); last lines of %s:\n%s", p.name, timeout, p.addr, p.logPath, tailFile(p.logPath, 30))
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// serverAddr finds the address the telemetry server logged (JSON logs).
func serverAddr(logPath string) string {
	f, err := os.Open(logPath)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		var line struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && strings.HasPrefix(line.Msg, "serving /metrics") && line.Addr != "" {
			return line.Addr
		}
	}
	return ""
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	return lines[len(lines)-1]
}
