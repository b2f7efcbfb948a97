// Package target executes one attempt of a run against its target: an HTTP
// endpoint, a Kafka topic, or a Go handler registered in the runner process.
//
// Every target hands the run id to the downstream as its idempotency key
// (HTTP "Idempotency-Key", Kafka header "idempotency-key") together with the
// job id, the attempt and the lease's fencing token, so a downstream can
// absorb a run executed twice (at-least-once delivery) and refuse a write
// from a holder whose lease was superseded (a smaller token).
//
// Every failure is an *Error with a machine-readable code and a retryable
// flag; the runner's retry policy decides from those alone. The
// classification of HTTP responses is: 2xx success; 408, 429 and 5xx
// retryable, with Retry-After (seconds or an HTTP date) reported as the
// minimum delay; every other status a failure that is not retried. A
// connection failure is retryable ("connection"); exceeding the job's
// timeout is retryable ("timeout").
//
// Downstream names the downstream a run talks to (the HTTP host, the Kafka
// cluster, a handler), the unit the runner's circuit breakers work per.
package target
