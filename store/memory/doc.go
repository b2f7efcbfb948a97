// Package memory is the in-memory implementation of store.Store for the
// embedded mode (sundial dev) and for fast tests. It keeps the behaviour of
// store/cassandra, proven by the same conformance suite (store/storetest);
// one mutex guards all state, so every operation is atomic, which is at least
// as strong as what Cassandra promises.
//
// Nothing survives the process. Run history expires after the configured
// retention, measured from each record's write time on the injected clock,
// as Cassandra's TTL does.
package memory
