// Package stacktest starts a test's installation on the real stack: the
// topics and the Cassandra schema of an installation in the test's own
// namespaces (package testenv), a store on them and an Enqueuer with its
// producer, which a test then runs a registry, a trigger consumer or a
// CLI command against. It is for tests only.
//
// # Invariants
//
//   - What it opens is closed at the test's cleanup, after the test's own
//     deferred stops: a component the test stopped never outlives its store.
//   - It creates nothing outside the namespaces testenv gave the test, so
//     tests of different packages share one stack without seeing each other.
package stacktest
