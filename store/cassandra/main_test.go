package cassandra_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that closing the store (and failing to open one) leaves no
// driver goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
