// Package lifecycle is the one Start/Stop shape of Sundial's long-running
// components (registry, trigger consumer, history writer, DAG engine,
// dispatcher, runner, telemetry server, embedded pipeline).
//
// A component embeds or holds a Lifecycle and implements
//
//	func (c *C) Start(ctx context.Context) error { return c.life.Start(ctx, c.start) }
//	func (c *C) Stop()                           { c.life.Stop() }
//
// where c.start does the component's setup (clients, reads) under ctx and
// starts its goroutines with Run.Go.
//
// A component made of others (a command, the embedded pipeline, the bench's
// pipeline) starts them with StartAll or Run.StartAll: in order, stopped in
// reverse order, and the ones started stopped again when one fails.
//
// # Invariants
//
//   - Ownership: every goroutine started with Run.Go belongs to the Run,
//     and Stop returns only after all of them have returned. A component
//     that starts goroutines of its own (per-partition owners, workers)
//     waits for them in a hook registered with Run.OnStop, so that Stop
//     still returns only when nothing of the run is left.
//   - Contexts: ctx given to Start bounds the start only. The goroutines
//     of a Run get a context of their own, detached from ctx's cancellation
//     but carrying its values, which ends when Stop is called.
//   - Order of Stop: cancel the run's context, wait for the Run.Go
//     goroutines, then run the OnStop hooks in reverse order of
//     registration (the last resource set up is released first).
//   - Failure of Start: if the start function fails, everything it set up
//     is undone as Stop would undo it, and the Lifecycle is stopped again:
//     Start may be called again.
//   - Restart: Start, Stop, Start, Stop works; each Start begins a new Run.
//     Start while running fails with ErrRunning. Stop is idempotent and safe
//     before Start.
//   - Serialisation: Start and Stop hold one mutex for their whole length,
//     so a Stop that races a Start waits for the start to finish and then
//     undoes it. A goroutine of the run must therefore never call Stop (it
//     would wait for itself).
package lifecycle
