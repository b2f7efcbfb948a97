// Package breaker keeps one circuit breaker (github.com/sony/gobreaker/v2)
// per team and downstream (Key), so that a failing host stops receiving a
// team's calls from every worker of the runner at once instead of each run
// finding out by itself. A breaker is a team's own: one team's failures
// never open another team's breaker to the same host.
//
// A breaker opens after Config.Failures consecutive failures of its
// downstream, stays open for Config.OpenTimeout, then lets
// Config.HalfOpenRequests calls through to probe; their success closes it.
// While it is open (or half-open with its probes out), Do returns an
// *OpenError without calling: the runner defers such a run by RetryIn
// without spending an attempt.
//
// Only failures that say something about the downstream's health count: a
// retryable failure (5xx, 408, 429, timeout, connection) counts as a failure;
// a final answer (2xx, other 4xx) counts as a success, because the host did
// answer; a cancellation by the runner (lease lost, run replaced, shutdown)
// is not counted at all.
//
// The number of breakers (team and downstream pairs) is bounded by
// Config.MaxDownstreams; calls beyond it run without a breaker. gobreaker reads the wall clock
// itself, so breakers cannot run on an injected clock; tests use short
// timeouts.
package breaker
