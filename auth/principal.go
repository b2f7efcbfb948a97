package auth

import (
	"context"
	"fmt"
)

// Role is what a principal may do within its team.
type Role int

// Roles, lowest first. The zero Role allows nothing.
const (
	RoleNone Role = iota
	// RoleViewer reads jobs, runs, DAGs, the DLQ and the audit trail.
	RoleViewer
	// RoleOperator also triggers, pauses, resumes, cancels, backfills and
	// replays dead runs.
	RoleOperator
	// RoleAdmin also applies and deletes the team's definitions, and
	// lists, creates and revokes the team's tokens through the API (the
	// team service). Teams, and cluster-admin tokens, are the cluster
	// admin's; the bootstrap CLI manages both with the store's credentials.
	RoleAdmin
)

// String is the role's name as the CLI and the API spell it.
func (r Role) String() string {
	switch r {
	case RoleViewer:
		return "viewer"
	case RoleOperator:
		return "operator"
	case RoleAdmin:
		return "admin"
	default:
		return "none"
	}
}

// ParseRole reads a role name written by String.
func ParseRole(s string) (Role, error) {
	switch s {
	case "viewer":
		return RoleViewer, nil
	case "operator":
		return RoleOperator, nil
	case "admin":
		return RoleAdmin, nil
	}
	return RoleNone, fmt.Errorf("role %q: want viewer, operator or admin", s)
}

// Principal is an authenticated caller.
type Principal struct {
	// Subject names the caller in audit records: "token:<id>",
	// "oidc:<issuer>#<subject>" or "kafka:<topic>".
	Subject string
	// Team is the team the caller acts for; empty for a cluster admin.
	Team string
	// Role is the caller's role in Team.
	Role Role
	// ClusterAdmin callers act on every team with RoleAdmin, and manage
	// teams and quotas.
	ClusterAdmin bool
}

// CanSee reports whether p may see the jobs and runs of team.
func (p Principal) CanSee(team string) bool {
	return p.ClusterAdmin || (p.Team != "" && p.Team == team && p.Role >= RoleViewer)
}

// Allows reports whether p may act with role need on team's jobs and runs.
func (p Principal) Allows(team string, need Role) bool {
	if p.ClusterAdmin {
		return true
	}
	return p.Team != "" && p.Team == team && p.Role >= need
}

type principalKey struct{}

// NewContext returns ctx carrying p.
func NewContext(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal NewContext stored in ctx.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}
