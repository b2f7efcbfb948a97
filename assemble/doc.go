// Package assemble builds Sundial's runner and the control-plane API's
// services from plain settings and the installation's open clients. It is
// the one place that decides what each is made of: `sundial runner`, the
// embedded pipeline, the bench and the worker SDK call Runner, and
// `sundial api` and the embedded pipeline (`sundial dev`) call
// APIServices, so the bench measures the runner that ships, dev serves the
// API that ships, and no caller forgets a piece (checkpoints, team quotas,
// the quota metrics, a service) that another one has. A store without an
// audit trail or quotas (the embedded one) leaves those services out.
//
// Invariants:
//   - The caller owns every client it passes (Redis, the store, the
//     Enqueuer's Kafka client) and closes them after the runner stopped;
//     assemble opens nothing and starts nothing.
//   - Every Redis key a runner writes starts with RunnerBackends.RedisKeyPrefix:
//     the leases under leasing.DefaultKeyPrefix, the runner's own keys under
//     runner.DefaultKeyPrefix.
//   - CheckRunner reports every bad setting without touching a backend, so a
//     command can refuse its flags before it connects anywhere.
package assemble
