// Package assemble builds Sundial's runner from plain settings and the
// installation's open clients. It is the one place that decides what a
// runner is made of: `sundial runner`, the embedded pipeline, the bench and
// the worker SDK all call it, so the bench measures the runner that ships
// and no caller forgets a piece (checkpoints, team quotas, the quota
// metrics) that another one has.
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
