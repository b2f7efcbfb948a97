// Package connect turns the connection settings every command shares (TLS,
// SASL, passwords, Redis topology) into the options of the Kafka, Cassandra
// and Redis drivers, and checks at start-up that a backend accepts them.
//
// Invariants:
//   - One home for connection settings: every command and every library
//     client that reaches a backend gets its TLS and authentication from the
//     values built here, so a secured cluster is reached the same way by the
//     registry, the dispatchers, the runners and the tools.
//   - One spelling of the Kafka settings: Kafka (seed brokers, TLS, SASL) and
//     its Options. The commands fill it from their flags (cmd/sundial
//     kafkaSettings), the bench from its stack (bench.Backends.Kafka), the
//     local stack's probes from their security settings
//     (deploy/local/stackcheck); the library packages (client, worker,
//     registry, dispatcher, runner, ...) take the resulting []kgo.Opt and
//     never a TLS or SASL setting of their own.
//   - Secrets are values, never printed: no error of this package carries a
//     password or a token, and Secret's String and LogValue mask it.
//     Callers read secrets from files or the environment, never from flag
//     defaults.
//   - Nothing invalid is repaired: a client certificate without its key, an
//     unknown SASL mechanism or a Sentinel master without Sentinels is an
//     error naming the setting, reported before any connection is tried.
//   - A wrong credential or an unknown certificate authority fails in bounded
//     time: PingKafka and PingRedis wait at most their context's deadline,
//     and their errors start with the backend's name ("kafka: ...",
//     "redis: ...") followed by the driver's cause (SASL authentication
//     failed, x509: certificate signed by unknown authority, WRONGPASS).
//   - Errors about a setting name it by its flag ("--kafka-sasl-username"),
//     which is also its key in the config file.
//   - An OAUTHBEARER token is read from its file at every authentication, so
//     a token rotated on disk is used by the next connection.
package connect
