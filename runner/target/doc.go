// Package target executes one attempt of a run against its target: an HTTP
// endpoint, a Kafka topic, a Go handler registered in the runner process, or
// a command the operator allows by name (Exec).
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
// Targets.Egress and HTTP.Egress (package runner/egress) decide what each
// team may reach: HTTP calls go through a transport per team whose dialer
// checks every resolved address (no proxy from the environment, at most
// MaxRedirects redirects, to http and https only); a Kafka topic and an
// exec command are checked before anything is produced or run. A refusal is
// "egress_refused" (a command: "exec_not_allowed"), not retried, and its
// message names the address, topic or command, never the URL. Of a non-2xx
// response's body, only a short prefix reaches the run's error.
//
// An exec target runs only a command the runner's ExecConfig.Allowed names
// and the policy allows to the run's team or the runner's pool: a job names
// the command, never a path. It gets the run's payload on stdin
// and the run id, job id, attempt and fencing token in its environment, and
// nothing of the runner's environment but PATH. A name not allowed is a
// failure that is not retried ("exec_not_allowed"); a non-zero exit is
// retryable ("exec_exit"). The job's timeout kills it. At most
// ExecConfig.MaxOutput bytes of its output are read.
//
// An attempt's Output keeps the last lines it logged, within MaxOutputLines
// and MaxOutputBytes (older lines dropped first, each line cut at
// MaxOutputLineBytes), whatever the handler or command writes; its Tail,
// when set, receives each line as it is logged (the runner's live tail).
//
// # Secrets
//
// An HTTP target's header values and URL path and query may hold secret
// references, "${secret:NAME}". HTTP.Execute resolves them at every attempt
// from Secrets for the run's owner team, and for no other team: SecretsDir
// reads <dir>/<team>/<NAME> and never leaves the team's directory. A
// reference that does not resolve fails the attempt, not retried
// ("secret_not_found", naming the secret and the team, never a value). The
// failure of an attempt never carries a secret: its text has every secret
// value of the call (a secret header's value, a resolved reference, a
// secret query value) and every secret part of a URL replaced by
// "<redacted>", also where the downstream echoed them in its answer; the
// runner logs and records that text only. Which values are secret is
// package jobspec's rule.
//
// Downstream names the downstream a run talks to (the HTTP host, the Kafka
// cluster, a handler); with the run's team, the unit the runner's circuit
// breakers work per.
package target
