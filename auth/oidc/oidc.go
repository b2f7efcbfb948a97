package oidc

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"

	"github.com/sundialhq/sundial/auth"
)

// Default claim names.
const (
	DefaultTeamClaim   = "sundial_team"
	DefaultRoleClaim   = "sundial_role"
	DefaultGroupsClaim = "groups"
)

// Config configures a Verifier.
type Config struct {
	// Issuer is the provider's issuer URL; its discovery document is at
	// Issuer + "/.well-known/openid-configuration". Required.
	Issuer string
	// Audience must be among the token's audiences (the client id the
	// provider issues Sundial's tokens for). Required.
	Audience string
	// TeamClaim names the claim that holds the caller's team.
	// Default DefaultTeamClaim.
	TeamClaim string
	// RoleClaim names the claim that holds the caller's role.
	// Default DefaultRoleClaim.
	RoleClaim string
	// GroupsClaim names the claim that lists the caller's groups (a string
	// array). Default DefaultGroupsClaim.
	GroupsClaim string
	// AdminGroup, when set, makes members of that group cluster admins.
	AdminGroup string
	// HTTPClient fetches discovery and keys; default http.DefaultClient.
	HTTPClient *http.Client
	// Now is the clock of expiry checks. Required.
	Now func() time.Time
}

// Validate reports every bad field.
func (c Config) Validate() error {
	var bad []error
	if c.Issuer == "" {
		bad = append(bad, errors.New("oidc config: issuer: required"))
	} else if !strings.HasPrefix(c.Issuer, "https://") && !strings.HasPrefix(c.Issuer, "http://") {
		bad = append(bad, fmt.Errorf("oidc config: issuer %q: want an http(s) URL", c.Issuer))
	}
	if c.Audience == "" {
		bad = append(bad, errors.New("oidc config: audience: required (the client id tokens are issued for)"))
	}
	if c.Now == nil {
		bad = append(bad, errors.New("oidc config: now: required"))
	}
	names := map[string]string{"team claim": c.TeamClaim, "role claim": c.RoleClaim, "groups claim": c.GroupsClaim}
	for field, v := range names {
		if strings.TrimSpace(v) != v {
			bad = append(bad, fmt.Errorf("oidc config: %s %q: surrounding spaces", field, v))
		}
	}
	return errors.Join(bad...)
}

// Verifier authenticates JWTs of one issuer. Safe for concurrent use.
type Verifier struct {
	cfg       Config
	verifier  *gooidc.IDTokenVerifier
	client    *http.Client
	endpoints Endpoints
}

// Endpoints are where a browser signs in with the issuer, as its discovery
// document names them: what a public client (the web console) needs to
// run an authorization-code flow with PKCE. They hold no secret.
type Endpoints struct {
	// Issuer is the configured issuer URL.
	Issuer string
	// Authorization is the provider's authorization_endpoint.
	Authorization string
	// Token is the provider's token_endpoint.
	Token string
	// Scopes is the provider's scopes_supported (may be empty: the field
	// is optional).
	Scopes []string
}

// New fetches the issuer's discovery document and returns a Verifier.
func New(ctx context.Context, c Config) (*Verifier, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c.TeamClaim = cmp.Or(c.TeamClaim, DefaultTeamClaim)
	c.RoleClaim = cmp.Or(c.RoleClaim, DefaultRoleClaim)
	c.GroupsClaim = cmp.Or(c.GroupsClaim, DefaultGroupsClaim)
	client := cmp.Or(c.HTTPClient, http.DefaultClient)
	// The key set fetches keys with the context given here for the life of
	// the provider, so it must not be a request's or start-up's context:
	// only its HTTP client is taken from it.
	provider, err := gooidc.NewProvider(gooidc.ClientContext(ctx, client), c.Issuer)
	if err != nil {
		return nil, fmt.Errorf("oidc issuer %s: discovery: %w", c.Issuer, err)
	}
	keysCtx := gooidc.ClientContext(context.WithoutCancel(ctx), client)
	v := provider.VerifierContext(keysCtx, &gooidc.Config{ClientID: c.Audience, Now: c.Now})
	ep := provider.Endpoint()
	var extra struct {
		Scopes []string `json:"scopes_supported"`
	}
	if err := provider.Claims(&extra); err != nil {
		return nil, fmt.Errorf("oidc issuer %s: discovery: %w", c.Issuer, err)
	}
	return &Verifier{cfg: c, verifier: v, client: client,
		endpoints: Endpoints{Issuer: c.Issuer, Authorization: ep.AuthURL, Token: ep.TokenURL, Scopes: extra.Scopes}}, nil
}

// Endpoints returns the issuer's sign-in endpoints, read from its
// discovery document in New.
func (v *Verifier) Endpoints() Endpoints { return v.endpoints }

// Authenticate implements auth.Authenticator for a raw JWT.
func (v *Verifier) Authenticate(ctx context.Context, bearer string) (auth.Principal, error) {
	if strings.Count(bearer, ".") != 2 {
		return auth.Principal{}, auth.Refuse(auth.ReasonMalformed, "bearer: neither a Sundial token nor a JWT")
	}
	tok, err := v.verifier.Verify(gooidc.ClientContext(ctx, v.client), bearer)
	if err != nil {
		return auth.Principal{}, classify(err)
	}
	var claims map[string]json.RawMessage
	if err := tok.Claims(&claims); err != nil {
		return auth.Principal{}, auth.Refuse(auth.ReasonClaims, "jwt: claims: "+err.Error())
	}
	subject := "oidc:" + tok.Issuer + "#" + tok.Subject
	if tok.Subject == "" {
		return auth.Principal{}, auth.Refuse(auth.ReasonClaims, "jwt: claim sub: missing")
	}
	if v.cfg.AdminGroup != "" {
		groups, err := stringsClaim(claims, v.cfg.GroupsClaim)
		if err != nil {
			return auth.Principal{}, err
		}
		if slices.Contains(groups, v.cfg.AdminGroup) {
			return auth.Principal{Subject: subject, Role: auth.RoleAdmin, ClusterAdmin: true}, nil
		}
	}
	team, err := stringClaim(claims, v.cfg.TeamClaim)
	if err != nil {
		return auth.Principal{}, err
	}
	if err := auth.CheckTeamName(team); err != nil {
		return auth.Principal{}, auth.Refuse(auth.ReasonClaims, "jwt: claim "+v.cfg.TeamClaim+": "+err.Error())
	}
	roleName, err := stringClaim(claims, v.cfg.RoleClaim)
	if err != nil {
		return auth.Principal{}, err
	}
	role, err := auth.ParseRole(roleName)
	if err != nil {
		return auth.Principal{}, auth.Refuse(auth.ReasonClaims, "jwt: claim "+v.cfg.RoleClaim+": "+err.Error())
	}
	return auth.Principal{Subject: subject, Team: team, Role: role}, nil
}

// classify turns go-oidc's verification error into a refusal with a
// reason. go-oidc types only the expiry; the rest are told apart by their
// messages, which a test pins.
func classify(err error) error {
	var expired *gooidc.TokenExpiredError
	msg := err.Error()
	switch {
	case errors.As(err, &expired):
		return auth.Refuse(auth.ReasonExpired, "jwt: expired at "+expired.Expiry.UTC().Format(time.RFC3339))
	case strings.Contains(msg, "expected audience"):
		return auth.Refuse(auth.ReasonWrongAudience, "jwt: "+strings.TrimPrefix(msg, "oidc: "))
	case strings.Contains(msg, "issued by a different provider"):
		return auth.Refuse(auth.ReasonWrongIssuer, "jwt: "+strings.TrimPrefix(msg, "oidc: "))
	case strings.Contains(msg, "failed to verify signature"), strings.Contains(msg, "signature"):
		return auth.Refuse(auth.ReasonBadSignature, "jwt: bad signature")
	case strings.Contains(msg, "malformed jwt"), strings.Contains(msg, "failed to unmarshal claims"), strings.Contains(msg, "unsupported"):
		return auth.Refuse(auth.ReasonMalformed, "jwt: "+strings.TrimPrefix(msg, "oidc: "))
	case strings.Contains(msg, "before the nbf"):
		return auth.Refuse(auth.ReasonExpired, "jwt: not valid yet")
	default:
		// Fetching the key set failed, or something go-oidc does not
		// type: the server's problem until shown otherwise.
		return fmt.Errorf("jwt: verify: %w", err)
	}
}

func stringClaim(claims map[string]json.RawMessage, name string) (string, error) {
	raw, ok := claims[name]
	if !ok {
		return "", auth.Refuse(auth.ReasonClaims, "jwt: claim "+name+": missing")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", auth.Refuse(auth.ReasonClaims, "jwt: claim "+name+": not a string")
	}
	return s, nil
}

// stringsClaim reads a list claim; a missing one is an empty list, and a
// single string is a list of one (providers differ).
func stringsClaim(claims map[string]json.RawMessage, name string) ([]string, error) {
	raw, ok := claims[name]
	if !ok {
		return nil, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err == nil {
		return list, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return []string{one}, nil
	}
	return nil, auth.Refuse(auth.ReasonClaims, "jwt: claim "+name+": not a list of strings")
}
