// Package tracing carries OpenTelemetry trace context through Sundial: from
// the API and the intake topics, through the registry and the dispatcher, in
// the run record to the runner, and on to the downstream call.
//
// # Invariants
//
//   - No global state. Every component is handed a trace.TracerProvider in
//     its Config (the command builds one, or none); nothing reads or sets
//     otel's global provider or propagator. A nil provider is the no-op one,
//     so tracing that is off costs a no-op span per step and nothing else:
//     no allocation of trace context, no header, no field.
//   - One wire format: W3C Trace Context (the traceparent and tracestate
//     headers). HTTP targets get it as request headers, Kafka targets and
//     Sundial's own topics as record headers of the same names, and a Run
//     carries its writer's traceparent in Run.traceparent, which survives the
//     copies a router, a retry or a dead-letter replay makes of the record.
//   - A run's trace is the trace of what asked for it: a trigger continues
//     its caller's trace (the traceparent header of the API request or of the
//     sundial.triggers record); a scheduled occurrence starts a trace of its
//     own. Every attempt of a run continues the run's trace, so one trace
//     tells the whole story of one run.
//   - Tracing never decides anything: a malformed traceparent is ignored
//     (the step starts a new trace), never an error.
package tracing
