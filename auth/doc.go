// Package auth says who is calling and what they may do.
//
// A Principal is the caller as the control plane sees it: a subject (a token
// id, an OIDC subject or a Kafka topic), the team it acts for and its role in
// that team. Authenticators turn credentials into a Principal; the API server
// puts it in the request context with NewContext, and handlers read it with
// FromContext.
//
// Invariants:
//   - A request without a Principal in its context is refused; no code path
//     treats "no principal" as "anyone".
//   - A Principal acts for exactly one team, or for every team when it is a
//     cluster admin. Reads and actions on another team's job or run are
//     answered as if the job or run did not exist (CanSee), so a caller
//     learns nothing about other teams' names.
//   - Roles are ordered: viewer < operator < admin. A role allows everything
//     a lower role allows.
//
// Credentials:
//   - Sundial's own bearer tokens read sdl_<id>_<secret>: the id is looked
//     up, the secret compared in constant time with the SHA-256 hash a
//     TokenStore keeps. No store, log or listing holds a secret; it is
//     shown once, when the token is created. A fast hash suffices because
//     the secret is 256 random bits, not a password.
//   - Teams and tokens live behind TokenStore: MemoryStore for the embedded
//     mode, Cassandra's (store/cassandra) for clusters; auth/authtest is
//     the conformance suite both pass.
//   - Tokens caches tokens it found live for TokensConfig.CacheTTL (10 s by
//     default), bounded in number. A revoked token therefore keeps working
//     on a server that cached it for at most CacheTTL after the revocation
//     is written, and never longer; an expired one stops at its expiry, as
//     expiry is checked at every call, cached or not. Unknown ids are never
//     cached.
//   - Package auth/oidc verifies JWTs of an OpenID provider. Chain routes a
//     bearer by its form: sdl_ tokens to Tokens (never to the provider),
//     anything else to OIDC when configured; it counts every outcome in
//     sundial_auth_authentications_total{method,result}.
//   - A refusal is a RefusedError matching ErrUnauthenticated, with a reason
//     the caller may be told; a store or provider that cannot be reached is
//     a plain error, the server's fault, so that an outage is not reported
//     as a bad credential.
package auth
