package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// stackDir is the folder of the local stack that stack.sh at script uses:
// SUNDIAL_STACK_DIR, or .stack at the root of the script's repository.
func stackDir(script string) string {
	if d := os.Getenv("SUNDIAL_STACK_DIR"); d != "" {
		return d
	}
	script = cmp.Or(script, "deploy/local/stack.sh")
	return filepath.Join(filepath.Dir(script), "..", "..", ".stack")
}

// backendPID finds the process of a backend of the local stack: the pid
// file stack.sh keeps (<stack dir>/run/<backend>.pid), when its process's
// command line is the backend's, else the process listening on the
// backend's port (addr, host:port). how says which; a backend not found
// has pid 0 and how says why.
func backendPID(proc, dir, backend, addr string) (pid int, how string) {
	pidFile := filepath.Join(dir, "run", backend+".pid")
	if b, err := os.ReadFile(pidFile); err == nil {
		if p, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && isBackend(proc, p, backend) {
			return p, "pid file " + pidFile
		}
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Sprintf("no pid file %s of a running %s, and no port in %q", pidFile, backend, addr)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return 0, fmt.Sprintf("no pid file %s of a running %s, and no port in %q", pidFile, backend, addr)
	}
	if p, ok := portOwner(proc, n); ok {
		return p, "listening on port " + port
	}
	return 0, fmt.Sprintf("not found: no pid file %s of a running %s, and no process of this machine listening on port %s", pidFile, backend, port)
}

// isBackend says whether process pid's command line is the backend's, as
// stack.sh starts it.
func isBackend(proc string, pid int, backend string) bool {
	b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "cmdline"))
	if err != nil || len(b) == 0 {
		return false
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	if backend == "redis" {
		return filepath.Base(args[0]) == "redis-server"
	}
	for _, a := range args {
		if a == "-Dsundial.stack.component="+backend {
			return true
		}
	}
	return false
}

// portOwner finds the process listening on TCP port: the socket's inode
// from /proc/net/tcp and tcp6, then the process holding it among
// /proc/<pid>/fd.
func portOwner(proc string, port int) (int, bool) {
	inodes := map[string]bool{}
	for _, f := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(filepath.Join(proc, "net", f))
		if err != nil {
			continue
		}
		for _, ino := range listeningInodes(b, port) {
			inodes[ino] = true
		}
	}
	if len(inodes) == 0 {
		return 0, false
	}
	dirs, err := os.ReadDir(proc)
	if err != nil {
		return 0, false
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		fds, err := os.ReadDir(filepath.Join(proc, d.Name(), "fd"))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(proc, d.Name(), "fd", fd.Name()))
			if err != nil {
				continue
			}
			if ino, ok := strings.CutPrefix(link, "socket:["); ok && inodes[strings.TrimSuffix(ino, "]")] {
				return pid, true
			}
		}
	}
	return 0, false
}

// listeningInodes reads the inodes of the sockets listening on port from
// the text of /proc/net/tcp or tcp6: local address (hex ip:port) in field
// 2, state in field 4 (0A is LISTEN), inode in field 10.
func listeningInodes(b []byte, port int) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[3] != "0A" {
			continue
		}
		_, hexPort, ok := strings.Cut(f[1], ":")
		if !ok {
			continue
		}
		if p, err := strconv.ParseUint(hexPort, 16, 16); err == nil && int(p) == port {
			out = append(out, f[9])
		}
	}
	return out
}
