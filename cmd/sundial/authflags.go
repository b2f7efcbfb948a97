package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/auth/oidc"
	"github.com/sundialhq/sundial/console"
)

// This file is the one home of the flags that say how a server
// authenticates its callers: Sundial's own tokens always, JWTs of an
// OpenID provider when --oidc-issuer is set. A server command adds
// authFlags to its flags and builds its authenticator with
// newAuthenticator.

// authFlags are the flags of a command that authenticates API callers.
func authFlags() []cli.Flag {
	return []cli.Flag{
		&cli.DurationFlag{Name: "auth-token-cache-ttl", Value: auth.DefaultTokenCacheTTL, Usage: "how long a token read from Cassandra is trusted without reading it again; a revoked token keeps working on a server for at most this long (negative: no cache)", Sources: envVar("auth-token-cache-ttl")},
		&cli.StringFlag{Name: "oidc-issuer", Usage: "issuer URL of an OpenID Connect provider whose JWTs are accepted besides Sundial's tokens (default: none)", Sources: envVar("oidc-issuer")},
		&cli.StringFlag{Name: "oidc-audience", Usage: "audience a JWT must carry: the client id the provider issues Sundial's tokens for (required with --oidc-issuer)", Sources: envVar("oidc-audience")},
		&cli.StringFlag{Name: "oidc-team-claim", Value: oidc.DefaultTeamClaim, Usage: "JWT claim that holds the caller's team", Sources: envVar("oidc-team-claim")},
		&cli.StringFlag{Name: "oidc-role-claim", Value: oidc.DefaultRoleClaim, Usage: "JWT claim that holds the caller's role: viewer, operator or admin", Sources: envVar("oidc-role-claim")},
		&cli.StringFlag{Name: "oidc-groups-claim", Value: oidc.DefaultGroupsClaim, Usage: "JWT claim that lists the caller's groups, read for --oidc-admin-group", Sources: envVar("oidc-groups-claim")},
		&cli.StringFlag{Name: "oidc-admin-group", Usage: "group whose members are cluster admins (default: none)", Sources: envVar("oidc-admin-group")},
		&cli.StringFlag{Name: "oidc-console-client-id", Usage: "client id of the web console at the provider, a public client (no secret): the console offers \"Sign in with\" the provider (authorization code with PKCE); its ID tokens must carry an audience --oidc-audience accepts (default: none, the console takes a pasted token)", Sources: envVar("oidc-console-client-id")},
	}
}

// authSettings are the values of authFlags.
type authSettings struct {
	// TokenCacheTTL is auth.TokensConfig.CacheTTL.
	TokenCacheTTL time.Duration
	// OIDC is the provider's configuration; OIDC.Issuer is empty when
	// only Sundial's tokens are accepted.
	OIDC oidc.Config
	// ConsoleClientID is the web console's client id at the provider;
	// empty: the console offers no sign-in with it.
	ConsoleClientID string
}

// readAuthSettings reads authFlags; errors name the flags. OIDC flags
// without --oidc-issuer are refused rather than ignored.
func readAuthSettings(cmd *cli.Command) (authSettings, error) {
	s := authSettings{
		TokenCacheTTL: cmd.Duration("auth-token-cache-ttl"),
		OIDC: oidc.Config{
			Issuer: cmd.String("oidc-issuer"), Audience: cmd.String("oidc-audience"),
			TeamClaim: cmd.String("oidc-team-claim"), RoleClaim: cmd.String("oidc-role-claim"),
			GroupsClaim: cmd.String("oidc-groups-claim"), AdminGroup: cmd.String("oidc-admin-group"),
		},
		ConsoleClientID: cmd.String("oidc-console-client-id"),
	}
	if s.TokenCacheTTL == 0 {
		return s, errors.New("--auth-token-cache-ttl 0: want a positive duration, or a negative one for no cache")
	}
	if s.OIDC.Issuer == "" {
		var bad []error
		for _, name := range []string{"oidc-audience", "oidc-team-claim", "oidc-role-claim", "oidc-groups-claim", "oidc-admin-group", "oidc-console-client-id"} {
			if cmd.IsSet(name) {
				bad = append(bad, fmt.Errorf("--%s: set without --oidc-issuer", name))
			}
		}
		return s, errors.Join(bad...)
	}
	if s.OIDC.Audience == "" {
		return s, errors.New("--oidc-audience: required with --oidc-issuer (the client id the provider issues Sundial's tokens for)")
	}
	return s, nil
}

// newAuthenticator builds what a server authenticates each request's
// bearer with: tokens from store, and JWTs of the --oidc-issuer when set,
// whose discovery document it fetches now, so that a server with an
// unreachable issuer does not start. Authentications are counted on reg.
func newAuthenticator(ctx context.Context, cmd *cli.Command, store auth.TokenStore, reg prometheus.Registerer) (*auth.Chain, error) {
	chain, _, err := newAuthenticatorAndSignIn(ctx, cmd, store, reg)
	return chain, err
}

// newAuthenticatorAndSignIn is newAuthenticator, and the web console's
// sign-in with the --oidc-issuer when --oidc-console-client-id is set
// (nil otherwise): the provider's endpoints come from the discovery
// document the verifier read.
func newAuthenticatorAndSignIn(ctx context.Context, cmd *cli.Command, store auth.TokenStore, reg prometheus.Registerer) (*auth.Chain, *console.SignIn, error) {
	s, err := readAuthSettings(cmd)
	if err != nil {
		return nil, nil, err
	}
	tokens, err := auth.NewTokens(auth.TokensConfig{Store: store, CacheTTL: s.TokenCacheTTL, Now: time.Now})
	if err != nil {
		return nil, nil, err
	}
	var signIn *console.SignIn
	cc := auth.ChainConfig{Tokens: tokens, Registerer: reg, Teams: auth.NewKnownTeams(store, s.TokenCacheTTL, time.Now)}
	if s.OIDC.Issuer != "" {
		s.OIDC.Now = time.Now
		v, err := oidc.New(ctx, s.OIDC)
		if err != nil {
			return nil, nil, fmt.Errorf("--oidc-issuer: %w", err)
		}
		cc.OIDC = v
		if s.ConsoleClientID != "" {
			ep := v.Endpoints()
			signIn = &console.SignIn{Issuer: ep.Issuer, AuthorizationEndpoint: ep.Authorization, TokenEndpoint: ep.Token, ClientID: s.ConsoleClientID,
				OfflineAccess: slices.Contains(ep.Scopes, "offline_access")}
			if err := signIn.Validate(); err != nil {
				return nil, nil, fmt.Errorf("--oidc-console-client-id: the issuer's discovery document: %w", err)
			}
		}
	}
	chain, err := auth.NewChain(cc)
	return chain, signIn, err
}
