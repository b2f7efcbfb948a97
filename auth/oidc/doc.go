// Package oidc authenticates API callers by the JWTs an organisation's
// OpenID Connect provider issues, and maps their claims to an
// auth.Principal.
//
// Verification is left to github.com/coreos/go-oidc/v3: it is maintained,
// small, used by Kubernetes' API server for exactly this check, and
// does discovery, key-set fetching with rotation (an unknown key id makes
// it fetch the JWKS again) and the standard claim checks (issuer, audience,
// expiry, not-before). Sundial adds only the mapping of claims to a team
// and a role.
//
// Invariants:
//   - A token is accepted only if its signature verifies against the
//     issuer's published keys, its issuer is the configured one, the
//     configured audience is among its audiences, and it has not expired by
//     the injected clock. Every refusal is an auth.RefusedError naming the
//     reason; a secret or the token itself never appears in it.
//   - A caller in the admin group is a cluster admin; anyone else must
//     carry both the team claim (a valid team name) and the role claim
//     (viewer, operator or admin). Nothing is guessed: a missing claim is
//     refused, never defaulted to a role.
//   - The subject is "oidc:<issuer>#<sub>", what the audit trail records.
//   - Discovery runs once, in New: a server whose issuer cannot be reached
//     does not start, rather than refusing every JWT later.
package oidc
