package cassandra_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that closing the store (and failing to open one) leaves no
// driver goroutine behind, with one exception: gocql hands each batch of
// schema events (the tests create and drop keyspaces all the time) to a
// goroutine of its own that waits for schema agreement, and Session.Close
// does not wait for it. After the close its queries fail, and it retries
// every 200 ms until Config.SchemaTimeout, so on a busy machine it can
// outlive the test binary's last test. It holds no store resource.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/gocql/gocql.(*Session).handleSchemaEvent"),
	)
}
