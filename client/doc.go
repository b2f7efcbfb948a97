// Package client is the Go client platform teams use to define, delete and
// trigger Sundial jobs and DAGs. It produces to Kafka exactly what the
// registry, the DAG engine and the trigger consumer read, to the team's own
// topic sundial.jobs.<team> (Config.Team, or Config.ByOwner for a service
// that writes for many teams), and reads the answers back:
//
//	c, err := client.New(client.Config{Kafka: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:9092")}, Team: "payments"})
//	...
//	defer c.Close()
//	receipt, err := c.Apply(ctx, spec)           // validated locally first
//	status, err := c.WaitStatus(ctx, receipt)    // CREATED, UPDATED, REJECTED...
//	summary, err := c.ApplyMany(ctx, specs, client.ApplyOptions{}) // many at once
//
// # Invariants
//
//   - Nothing invalid is produced: Apply and ApplyAll check every definition
//     with jobspec.Limits.ValidateSpec (the registry's own rules) and return a
//     *jobspec.ValidationError listing every bad field, producing nothing.
//     ApplyAll produces no definition unless all of them are valid.
//   - A definition is produced keyed by its id, with the content-type header,
//     and acknowledged by every in-sync replica (acks=all, idempotent
//     producer) before Apply returns. Its Receipt names the record (topic,
//     partition, offset), which is what the registry's answer names too, so
//     WaitStatus finds exactly the answer to that record.
//   - WaitStatus reads every answer written from shortly before the record on,
//     including one written while it looks up where to start: it looks up the
//     status partitions' ends before their offsets by time (internal/startoffsets), as
//     a lookup by time that finds nothing falls back on an end that may
//     already be past such an answer.
//   - ApplyMany streams: it produces each definition without waiting for
//     the one before, keeps at most ApplyOptions.MaxInFlight produced and
//     unanswered, and matches answers by the source they name. An invalid
//     definition is answered REJECTED locally and not produced; the others
//     go on. Its memory is bounded by MaxInFlight and the rejections kept,
//     not by the number of definitions.
//   - One framing per record kind: job definitions (Apply, ApplyAll,
//     ApplyMany), DAG definitions (ApplyDag: JSON with sundial-kind: dag),
//     tombstones (Delete, DeleteDag) and triggers (SendTrigger) are built
//     here only; the CLI, the API and the embedded pipeline call these.
//   - The client holds no state beyond its Kafka connections; it is safe
//     for concurrent use.
//   - A library: it imports no process package (registry, trigger,
//     dispatcher, runner, dagengine, store) and no Prometheus, so a producer
//     links only what it needs; internal/layering enforces it.
package client
