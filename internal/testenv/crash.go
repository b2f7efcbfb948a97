package testenv

import (
	"os"
	"sync"
	"testing"
	"time"
)

// EnvCrashStackCtl names a deploy/local/stack.sh, with its settings in the
// environment, whose backends a test may kill with SIGKILL and start again
// (make test-crash sets it, for a stack of its own on other ports).
const EnvCrashStackCtl = "SUNDIAL_CRASH_STACK_CTL"

// CrashStack kills and starts the backends of a stack that is the test's to
// break: never the shared stack other tests run against.
type CrashStack struct {
	Cluster
}

// NeedCrashStack returns the controller of a stack the test may kill. The
// tests that need it are behind the crash build tag (make test-crash), so a
// missing one fails them.
func NeedCrashStack(t testing.TB) CrashStack {
	t.Helper()
	skipShort(t, "a stack to crash")
	ctl := os.Getenv(EnvCrashStackCtl)
	if ctl == "" {
		t.Fatalf("needs a stack it may kill: %s is unset; run `make test-crash`", EnvCrashStackCtl)
	}
	return CrashStack{Cluster{ctl: ctl, mu: new(sync.Mutex)}}
}

// Start starts backend again and returns once it serves requests.
func (c CrashStack) Start(t testing.TB, backend string) {
	t.Helper()
	c.run(t, 5*time.Minute, "up", backend)
}
