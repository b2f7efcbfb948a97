package gateway_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the tests, or, when processEnv is set, one process of
// process_test.go (a worker or a gateway) in place of them.
func TestMain(m *testing.M) {
	if raw := os.Getenv(processEnv); raw != "" {
		os.Exit(processMain(raw))
	}
	goleak.VerifyTestMain(m)
}
