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
package auth
