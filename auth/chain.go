package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Authenticator turns the bearer credential of a request into a Principal.
// Errors matching ErrUnauthenticated are the caller's fault; others are
// the server's (a store or an issuer that cannot be reached).
type Authenticator interface {
	Authenticate(ctx context.Context, bearer string) (Principal, error)
}

// ChainConfig configures a Chain.
type ChainConfig struct {
	// Tokens authenticates bearers that start with TokenPrefix. Required.
	Tokens Authenticator
	// OIDC authenticates every other bearer (a JWT); nil refuses them.
	OIDC Authenticator
	// Teams, when set, is checked for the team a JWT names: a JWT for a
	// team that does not exist is refused (ReasonUnknownTeam), as a token
	// for it cannot be created. Sundial's tokens are not checked again:
	// their team existed when they were created, and a team with live
	// tokens cannot be deleted.
	Teams *KnownTeams
	// Registerer registers the authentications metric; nil registers
	// nothing.
	Registerer prometheus.Registerer
}

// Chain routes each bearer to the one authenticator that can judge it, by
// its form, and counts the outcomes. Sundial's tokens never reach the
// identity provider, and a JWT never costs a token-store read.
type Chain struct {
	tokens, oidc Authenticator
	teams        *KnownTeams
	results      *prometheus.CounterVec
}

// NewChain returns a Chain; it fails when the metric cannot be registered.
func NewChain(c ChainConfig) (*Chain, error) {
	if c.Tokens == nil {
		return nil, errors.New("auth chain: tokens: required")
	}
	results := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sundial_auth_authentications_total",
		Help: "Authentications of API callers by method (token, oidc, none) and result (ok, error, or the reason of a refusal).",
	}, []string{"method", "result"})
	if c.Registerer != nil {
		if err := c.Registerer.Register(results); err != nil {
			return nil, err
		}
	}
	return &Chain{tokens: c.Tokens, oidc: c.OIDC, teams: c.Teams, results: results}, nil
}

// Authenticate implements Authenticator.
func (c *Chain) Authenticate(ctx context.Context, bearer string) (Principal, error) {
	method, a := "none", Authenticator(nil)
	switch {
	case strings.HasPrefix(bearer, TokenPrefix):
		method, a = "token", c.tokens
	case bearer != "" && c.oidc != nil:
		method, a = "oidc", c.oidc
	}
	var p Principal
	var err error
	switch {
	case a != nil:
		p, err = a.Authenticate(ctx, bearer)
		if err == nil && method == "oidc" {
			err = c.checkTeam(ctx, p)
		}
	case bearer == "":
		err = Refuse(ReasonMalformed, "no bearer token")
	default:
		err = Refuse(ReasonNoMethod, "not a Sundial token ("+TokenPrefix+"…), and no OIDC issuer is configured")
	}
	c.results.WithLabelValues(method, result(err)).Inc()
	return p, err
}

// checkTeam refuses a JWT's principal whose team does not exist.
func (c *Chain) checkTeam(ctx context.Context, p Principal) error {
	if c.teams == nil || p.ClusterAdmin {
		return nil
	}
	ok, err := c.teams.Exists(ctx, p.Team)
	switch {
	case err != nil:
		return fmt.Errorf("check team %s: %w", p.Team, err)
	case !ok:
		return Refuse(ReasonUnknownTeam, fmt.Sprintf("jwt: team %q does not exist (a cluster admin creates it with 'sundial teams create')", p.Team))
	}
	return nil
}

// result is the metric's label for the outcome err.
func result(err error) string {
	var refused *RefusedError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &refused):
		return refused.Reason
	default:
		return "error"
	}
}
