package testenv

import "go.uber.org/goleak"

// GocqlSchemaAgreement is the one goroutine goleak may find behind a test
// package that opens Cassandra sessions. gocql hands each batch of schema
// events (the tests create and drop keyspaces all the time) to a goroutine
// of its own that waits for schema agreement, and Session.Close does not
// wait for it: after the close its queries fail, and it retries every
// 200 ms until the session's schema timeout, so on a busy machine it can
// outlive the test binary's last test. It holds no resource of Sundial's.
// Its stack always passes through Session.handleSchemaEvent, whatever is on
// top (awaitSchemaAgreement, a query, a sleep).
func GocqlSchemaAgreement() goleak.Option {
	return goleak.IgnoreAnyFunction("github.com/gocql/gocql.(*Session).handleSchemaEvent")
}
