// Package testenv finds the real backends (Kafka, Cassandra, Redis) for
// integration tests and gives each test its own namespace on them.
//
// Where a backend comes from, in order:
//
//  1. An address in the environment: SUNDIAL_KAFKA_BROKERS,
//     SUNDIAL_CASSANDRA_HOSTS, SUNDIAL_REDIS_ADDR (comma-separated for the first
//     two). `make stack-up` starts the local stack and
//     `source <(deploy/local/stack.sh env)` exports them; `make test` does both.
//  2. Where the variable is unset and a Docker engine answers, a container
//     started by testcontainers-go, shared by the tests of one test binary
//     and reaped when the binary exits.
//  3. Neither: the test fails when CI is set (a missing backend is never a
//     silent skip in CI) and is skipped otherwise, with a message that says how
//     to start the stack.
//
// Under `go test -short` every test that needs a backend is skipped: -short is
// the fast unit-test mode (`make test-unit`).
//
// The local clusters (deploy/local/cluster.sh: three Kafka brokers, a Redis
// Cluster) come only from the environment: SUNDIAL_KAFKA_CLUSTER_BROKERS,
// SUNDIAL_REDIS_CLUSTER_ADDRS and, for tests that kill nodes,
// SUNDIAL_CLUSTER_CTL. The tests that need them are behind the cluster
// build tag (`make test-cluster` passes it), so `make test` neither builds
// nor skips them, and a missing cluster fails them.
//
// NeedKafkaRedis is the start of a test that runs runners on the stack:
// both namespaces, the installation's topics made under the topic prefix,
// and a client on each backend.
//
// Beside the backends it holds the helpers tests of many packages share,
// one home each: SyncBuffer, an output a test reads while goroutines write
// it; Logger, a logger onto the test's log; BuildSundial, the sundial
// binary for tests that run its commands as processes.
//
// Invariants:
//   - Each Need* call returns a namespace no other test uses: a Cassandra
//     keyspace name, a Kafka topic prefix, a Redis key prefix. Tests of
//     different packages run in parallel against one stack without seeing
//     each other.
//   - What a test creates in its namespace is removed in t.Cleanup: the
//     keyspace is dropped, topics with the prefix are deleted, keys with the
//     prefix are deleted.
//   - An address that is set but does not answer fails the test: it is a
//     misconfiguration, not a missing backend.
//
// The containers of step 2 are the one piece of process-wide state in the
// project: they are memoised per test binary so that a package's tests share
// one Kafka instead of starting one each.
package testenv
