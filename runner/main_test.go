package runner

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/sundialhq/sundial/internal/testenv"
)

func TestMain(m *testing.M) {
	// The test binary doubles as a runner process for the tests that kill
	// one with SIGKILL (process_test.go).
	if cfg := os.Getenv(runnerProcessEnv); cfg != "" {
		os.Exit(runnerProcessMain(cfg))
	}
	goleak.VerifyTestMain(m, testenv.GocqlSchemaAgreement(),
		// httptest servers' idle keep-alive connections of the default
		// transport outlive the test that closed the server briefly.
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}
