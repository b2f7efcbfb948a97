// Package embedded runs the whole Sundial pipeline in one process over
// in-process backends: franz-go's kfake for Kafka, miniredis for Redis and
// the in-memory schedule store. It is what `sundial dev` (and `make dev`)
// starts: a first look that needs nothing installed.
//
// The components are the real ones — registry, trigger consumer, dispatcher,
// runner, history writer, DAG engine — wired exactly as the separate
// processes wire them;
// only the backends differ. The in-memory store passes the same conformance
// suite as the Cassandra store (store/storetest), and the lease scripts run
// the same suite on miniredis as on Redis (leasing). Figures measured here are
// never figures of Sundial: the bench runs on the real stack.
//
// With Config.APIAddr it also serves the control-plane API, built by
// assemble.APIServices as `sundial api` builds it, on the same backends.
//
// Invariants:
//   - Start returns only when every backend and component is up; Stop stops
//     the components in the reverse order, then the backends, and returns when
//     every goroutine has exited (internal/lifecycle). Stop is idempotent and
//     safe before Start. A stopped pipeline may be started again, with new,
//     empty backends; the metrics of the stopped components are unregistered
//     from Config.Registerer first, so the new ones can register.
//   - Nothing outlives the process: no file, port or key is left behind.
package embedded
