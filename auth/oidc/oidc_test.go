package oidc_test

import (
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/auth/oidc"
	"github.com/sundialhq/sundial/auth/oidc/oidctest"
)

// sign returns claims signed with key under kid.
func sign(t *testing.T, key *rsa.PrivateKey, kid string, claims map[string]any) string {
	t.Helper()
	return oidctest.Sign(t, key, kid, claims)
}

var now = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

// issuer is the local provider with the claims of a payments operator.
type issuer struct {
	*oidctest.Provider
}

// claims are valid claims of a payments operator; mutate changes them.
func (is *issuer) claims(mutate func(map[string]any)) map[string]any {
	c := map[string]any{
		"iss": is.URL(), "sub": "alice", "aud": "sundial",
		"iat": now.Add(-time.Minute).Unix(), "exp": now.Add(time.Hour).Unix(),
		"sundial_team": "payments", "sundial_role": "operator", "groups": []string{"engineering"},
	}
	if mutate != nil {
		mutate(c)
	}
	return c
}

func setup(t *testing.T, mutate ...func(*oidc.Config)) (*issuer, *oidc.Verifier) {
	t.Helper()
	is := &issuer{oidctest.New(t)}
	cfg := oidc.Config{Issuer: is.URL(), Audience: "sundial", AdminGroup: "sundial-admins", HTTPClient: is.Client(), Now: func() time.Time { return now }}
	for _, m := range mutate {
		m(&cfg)
	}
	v, err := oidc.New(t.Context(), cfg)
	require.NoError(t, err)
	return is, v
}

func TestValidTokenMapsClaims(t *testing.T) {
	t.Parallel()
	is, v := setup(t)
	p, err := v.Authenticate(t.Context(), is.Sign(t, is.claims(nil)))
	require.NoError(t, err)
	assert.Equal(t, auth.Principal{Subject: "oidc:" + is.URL() + "#alice", Team: "payments", Role: auth.RoleOperator}, p)

	admin := is.claims(func(c map[string]any) {
		c["groups"] = []string{"engineering", "sundial-admins"}
		delete(c, "sundial_team")
		delete(c, "sundial_role")
	})
	p, err = v.Authenticate(t.Context(), is.Sign(t, admin))
	require.NoError(t, err)
	assert.Equal(t, auth.Principal{Subject: "oidc:" + is.URL() + "#alice", Role: auth.RoleAdmin, ClusterAdmin: true}, p)

	for range 3 {
		_, err := v.Authenticate(t.Context(), is.Sign(t, is.claims(nil)))
		require.NoError(t, err)
	}
	assert.Equal(t, 1, is.KeyFetches(), "the key set is fetched once and kept")
}

func TestConfiguredClaimNames(t *testing.T) {
	t.Parallel()
	is, v := setup(t, func(c *oidc.Config) { c.TeamClaim, c.RoleClaim, c.GroupsClaim = "team", "access", "roles" })
	p, err := v.Authenticate(t.Context(), is.Sign(t, is.claims(func(c map[string]any) {
		c["team"], c["access"] = "search", "viewer"
	})))
	require.NoError(t, err)
	assert.Equal(t, "search", p.Team)
	assert.Equal(t, auth.RoleViewer, p.Role)

	p, err = v.Authenticate(t.Context(), is.Sign(t, is.claims(func(c map[string]any) { c["roles"] = "sundial-admins" })))
	require.NoError(t, err)
	assert.True(t, p.ClusterAdmin, "a single-string groups claim counts as a list of one")
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	is, v := setup(t)
	otherKey := oidctest.NewKey(t)
	valid := is.Sign(t, is.claims(nil))
	parts := strings.Split(valid, ".")
	tampered := is.claims(func(c map[string]any) { c["sundial_role"] = "admin" })
	tamperedPayload, err := json.Marshal(tampered)
	require.NoError(t, err)

	cases := []struct {
		name, token, reason, detail string
	}{
		{"wrong audience", is.Sign(t, is.claims(func(c map[string]any) { c["aud"] = "another-app" })), auth.ReasonWrongAudience, `expected audience "sundial"`},
		{"expired", is.Sign(t, is.claims(func(c map[string]any) { c["exp"] = now.Add(-time.Second).Unix() })), auth.ReasonExpired, "expired at"},
		{"no expiry", is.Sign(t, is.claims(func(c map[string]any) { delete(c, "exp") })), auth.ReasonExpired, "expired at"},
		{"signed by another key", sign(t, otherKey, "key-1", is.claims(nil)), auth.ReasonBadSignature, "bad signature"},
		{"payload changed after signing", parts[0] + "." + oidctest.B64(tamperedPayload) + "." + parts[2], auth.ReasonBadSignature, "bad signature"},
		{"another issuer", is.Sign(t, is.claims(func(c map[string]any) { c["iss"] = "https://idp.example" })), auth.ReasonWrongIssuer, "different provider"},
		{"not a jwt", "opaque-access-token", auth.ReasonMalformed, "neither"},
		{"garbage jwt", "a.b.c", auth.ReasonMalformed, "jwt"},
		{"no team", is.Sign(t, is.claims(func(c map[string]any) { delete(c, "sundial_team") })), auth.ReasonClaims, "claim sundial_team: missing"},
		{"bad team", is.Sign(t, is.claims(func(c map[string]any) { c["sundial_team"] = "Pay Ments" })), auth.ReasonClaims, "claim sundial_team"},
		{"no role", is.Sign(t, is.claims(func(c map[string]any) { delete(c, "sundial_role") })), auth.ReasonClaims, "claim sundial_role: missing"},
		{"unknown role", is.Sign(t, is.claims(func(c map[string]any) { c["sundial_role"] = "owner" })), auth.ReasonClaims, `role "owner"`},
		{"role not a string", is.Sign(t, is.claims(func(c map[string]any) { c["sundial_role"] = 3 })), auth.ReasonClaims, "not a string"},
	}
	for _, c := range cases {
		_, err := v.Authenticate(t.Context(), c.token)
		require.ErrorIs(t, err, auth.ErrUnauthenticated, c.name)
		var r *auth.RefusedError
		require.ErrorAs(t, err, &r, c.name)
		assert.Equal(t, c.reason, r.Reason, "%s: %v", c.name, err)
		assert.Contains(t, err.Error(), c.detail, c.name)
		assert.NotContains(t, err.Error(), parts[2], "%s: the error does not echo the token", c.name)
	}
}

func TestDiscoveryFailsAtStart(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	_, err := oidc.New(t.Context(), oidc.Config{Issuer: srv.URL, Audience: "sundial", Now: time.Now})
	require.Error(t, err)
	assert.ErrorContains(t, err, "oidc issuer "+srv.URL+": discovery")
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	_, err := oidc.New(t.Context(), oidc.Config{Issuer: "idp.example", TeamClaim: " team"})
	require.Error(t, err)
	for _, want := range []string{`issuer "idp.example": want an http(s) URL`, "audience: required", "now: required", `team claim " team"`} {
		assert.ErrorContains(t, err, want)
	}
}

func TestKeyRotation(t *testing.T) {
	t.Parallel()
	is, v := setup(t)
	_, err := v.Authenticate(t.Context(), is.Sign(t, is.claims(nil)))
	require.NoError(t, err)

	// The provider rotates its key: a token with the new key id makes the
	// verifier fetch the key set again, and the old key stops verifying.
	newKey := oidctest.NewKey(t)
	oldKey, oldKid := is.Key()
	is.Rotate(newKey, "key-2")
	p, err := v.Authenticate(t.Context(), sign(t, newKey, "key-2", is.claims(nil)))
	require.NoError(t, err)
	assert.Equal(t, "payments", p.Team)
	_, err = v.Authenticate(t.Context(), sign(t, oldKey, oldKid, is.claims(nil)))
	require.ErrorIs(t, err, auth.ErrUnauthenticated, "a token of the retired key")
	assert.GreaterOrEqual(t, is.KeyFetches(), 2)
}

// TestTestProviderSignIn: the local provider's browser sign-in gives an
// ID token the verifier accepts only to the code_verifier of the code's
// challenge, and a code only once.
func TestTestProviderSignIn(t *testing.T) {
	t.Parallel()
	is, _ := setup(t)
	is.SetSignIn(&oidctest.SignIn{ClientID: "sundial", Claims: map[string]any{"sub": "bob", "sundial_team": "search", "sundial_role": "viewer"}})
	noRedirect := *is.Client()
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	const verifier = "a-verifier-of-at-least-forty-three-characters-0123456789"
	sum := sha256.Sum256([]byte(verifier))
	authorize := func(challenge string) (code string) {
		t.Helper()
		q := url.Values{"response_type": {"code"}, "client_id": {"sundial"}, "redirect_uri": {"https://ops.example/sundial/console/"},
			"scope": {"openid"}, "state": {"s1"}, "nonce": {"n1"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}}
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, is.URL()+"/authorize?"+q.Encode(), nil)
		require.NoError(t, err)
		resp, err := noRedirect.Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		require.Equal(t, http.StatusFound, resp.StatusCode)
		back, err := url.Parse(resp.Header.Get("Location"))
		require.NoError(t, err)
		assert.Equal(t, "s1", back.Query().Get("state"))
		return back.Query().Get("code")
	}
	exchange := func(code, verifier string) (int, map[string]any) {
		t.Helper()
		form := url.Values{"grant_type": {"authorization_code"}, "code": {code},
			"redirect_uri": {"https://ops.example/sundial/console/"}, "client_id": {"sundial"}, "code_verifier": {verifier}}
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, is.URL()+"/token", strings.NewReader(form.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := is.Client().Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		var body map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		return resp.StatusCode, body
	}

	code := authorize(oidctest.B64(sum[:]))
	status, body := exchange(code, "another-verifier-of-forty-three-characters-000000000")
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, "invalid_grant", body["error"])
	status, _ = exchange(code, verifier)
	assert.Equal(t, http.StatusBadRequest, status, "a code is exchanged once, even after a refusal")

	code = authorize(oidctest.B64(sum[:]))
	status, body = exchange(code, verifier)
	require.Equal(t, http.StatusOK, status, "%v", body)
	idToken, _ := body["id_token"].(string)
	// The verifier's clock is fixed at 2030; the provider signs with the
	// real one, so check the claims with a verifier of the real clock.
	live, err := oidc.New(t.Context(), oidc.Config{Issuer: is.URL(), Audience: "sundial", HTTPClient: is.Client(), Now: time.Now})
	require.NoError(t, err)
	p, err := live.Authenticate(t.Context(), idToken)
	require.NoError(t, err)
	assert.Equal(t, auth.Principal{Subject: "oidc:" + is.URL() + "#bob", Team: "search", Role: auth.RoleViewer}, p)
	assert.Equal(t, []string{"code_verifier: does not match the code_challenge", "code: unknown or already used"}, is.Refused())
	assert.Equal(t, oidc.Endpoints{Issuer: is.URL(), Authorization: is.URL() + "/authorize", Token: is.URL() + "/token",
		Scopes: []string{"openid", "profile", "email", "offline_access"}}, live.Endpoints())
}
