package discovery

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The test binary doubles as an executor process for the test that
	// kills one with SIGKILL (kill_test.go).
	if cfg := os.Getenv(announcerProcessEnv); cfg != "" {
		os.Exit(announcerProcessMain(cfg))
	}
	goleak.VerifyTestMain(m)
}
