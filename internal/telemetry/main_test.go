package telemetry_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// gocql's and go-redis's background goroutines of sessions closed by
		// the integration tests exit asynchronously.
		goleak.IgnoreTopFunction("github.com/gocql/gocql.(*eventDebouncer).flusher"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}
