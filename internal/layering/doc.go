// Package layering holds the import rules of the module, as a test, their
// one home: the lists libraries and forbidden in layering_test.go are the
// rule, and nothing else restates them (.golangci.yml, CONTRIBUTING.md and
// docs/architecture.md point here). In short, the libraries producers and
// tools link must not depend, even indirectly, on a process package or on
// Prometheus. A producer that defines jobs with
// package client then links neither Cassandra's store nor a metrics
// registry, and what a definition is (package jobspec) cannot come to
// depend on how one process happens to run it.
//
// The test asks the go command for the full dependency list of each
// library (go list -deps), so a forbidden package reached through any
// chain of imports fails it, naming the library, the package and the
// chain's first step.
package layering
