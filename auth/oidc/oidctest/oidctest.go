package oidctest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// Provider is a local OpenID provider. It counts the fetches of its key set.
type Provider struct {
	srv *httptest.Server

	mu         sync.Mutex
	key        *rsa.PrivateKey
	kid        string
	keyFetches int
	// signIn is the user a browser signs in as (SetSignIn); codes are the
	// authorization codes issued and not yet exchanged.
	signIn  *SignIn
	codes   map[string]grant
	refused []string
	// refreshTokens are the refresh tokens issued and not yet used: each
	// is used once, and its refresh answers a new one.
	refreshTokens map[string]string // token -> client id
	refreshes     int
}

// SignIn is the user the provider's /authorize signs in, without asking:
// the ID token of the exchange carries Claims, with the issuer, the client
// id as audience, the nonce and an hour's validity added.
type SignIn struct {
	// ClientID is the one client the provider knows (a public client).
	ClientID string
	Claims   map[string]any
	// Hold makes /authorize answer a page with a link (id "continue") to
	// the redirect, rather than the redirect itself, so that a test can
	// change the browser's state before the code comes back.
	Hold bool
	// Lifetime is how long an ID token is valid; zero is an hour.
	Lifetime time.Duration
	// Refresh makes the code's exchange answer a refresh token too, and
	// /token renew with it (grant_type refresh_token): a new ID token and
	// a new refresh token, the old one refused from then on.
	Refresh bool
}

// grant is what an authorization code was issued for.
type grant struct {
	clientID, redirectURI, challenge, nonce string
}

// New starts a provider whose key id is "key-1"; it stops when t ends.
func New(t testing.TB) *Provider {
	t.Helper()
	p := &Provider{key: NewKey(t), kid: "key-1", codes: map[string]grant{}, refreshTokens: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{
			"issuer": p.srv.URL, "jwks_uri": p.srv.URL + "/keys",
			"authorization_endpoint": p.srv.URL + "/authorize", "token_endpoint": p.srv.URL + "/token",
			"response_types_supported": []string{"code"}, "code_challenge_methods_supported": []string{"S256"},
			"id_token_signing_alg_values_supported": []string{"RS256"},
			"scopes_supported":                      []string{"openid", "profile", "email", "offline_access"},
			"grant_types_supported":                 []string{"authorization_code", "refresh_token"},
		})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, _ *http.Request) {
		p.mu.Lock()
		p.keyFetches++
		pub, kid := p.key.PublicKey, p.kid
		p.mu.Unlock()
		writeJSON(w, map[string]any{"keys": []map[string]string{{
			"kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid,
			"n": B64(pub.N.Bytes()), "e": B64(big.NewInt(int64(pub.E)).Bytes()),
		}}})
	})
	mux.HandleFunc("GET /authorize", p.authorize)
	mux.HandleFunc("/token", p.token)
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

// URL is the provider's issuer URL.
func (p *Provider) URL() string { return p.srv.URL }

// Client is an HTTP client that reaches the provider.
func (p *Provider) Client() *http.Client { return p.srv.Client() }

// Key returns the current signing key and its id.
func (p *Provider) Key() (*rsa.PrivateKey, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.key, p.kid
}

// Rotate replaces the signing key: the key set serves only the new one.
func (p *Provider) Rotate(key *rsa.PrivateKey, kid string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.key, p.kid = key, kid
}

// KeyFetches is how many times the key set was fetched.
func (p *Provider) KeyFetches() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.keyFetches
}

// Sign returns claims signed with the current key.
func (p *Provider) Sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	key, kid := p.Key()
	return Sign(t, key, kid, claims)
}

// NewKey generates an RSA key for signing.
func NewKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("generate key: %v", err)
	}
	return key
}

// Sign returns a compact RS256 JWS of claims, signed with key under kid.
func Sign(t testing.TB, key *rsa.PrivateKey, kid string, claims map[string]any) string {
	t.Helper()
	jwt, err := sign(key, kid, claims)
	if err != nil {
		t.Fatal(err)
	}
	return jwt
}

func sign(key *rsa.PrivateKey, kid string, claims map[string]any) (string, error) {
	header, err := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": kid})
	if err != nil {
		return "", fmt.Errorf("header: %w", err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("claims: %w", err)
	}
	signing := B64(header) + "." + B64(payload)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("sign: %w", err)
	}
	return signing + "." + B64(sig), nil
}

// B64 is the unpadded URL-safe base64 of JWTs.
func B64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// SetSignIn sets who /authorize signs in; nil refuses every sign-in.
func (p *Provider) SetSignIn(s *SignIn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.signIn = s
}

// Refreshes is how many times /token renewed a sign-in with a refresh
// token.
func (p *Provider) Refreshes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refreshes
}

// Refused lists the reasons /token refused an exchange, oldest first.
func (p *Provider) Refused() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.refused...)
}

// authorize is the authorization endpoint of a code flow with PKCE
// (S256 only): it approves at once and sends the browser back to
// redirect_uri with the code and the state it was given.
func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p.mu.Lock()
	s := p.signIn
	p.mu.Unlock()
	switch {
	case s == nil:
		http.Error(w, "no sign-in is set up (SetSignIn)", http.StatusForbidden)
		return
	case q.Get("client_id") != s.ClientID:
		http.Error(w, "client_id "+q.Get("client_id")+": unknown client", http.StatusBadRequest)
		return
	case q.Get("response_type") != "code":
		http.Error(w, "response_type "+q.Get("response_type")+": want code", http.StatusBadRequest)
		return
	case q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		http.Error(w, "code_challenge with code_challenge_method S256: required (PKCE)", http.StatusBadRequest)
		return
	case !strings.Contains(" "+q.Get("scope")+" ", " openid "):
		http.Error(w, "scope "+q.Get("scope")+": want openid", http.StatusBadRequest)
		return
	}
	back, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || !back.IsAbs() {
		http.Error(w, "redirect_uri "+q.Get("redirect_uri")+": want an absolute URL", http.StatusBadRequest)
		return
	}
	code := randomString()
	p.mu.Lock()
	p.codes[code] = grant{clientID: s.ClientID, redirectURI: q.Get("redirect_uri"), challenge: q.Get("code_challenge"), nonce: q.Get("nonce")}
	p.mu.Unlock()
	v := back.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	back.RawQuery = v.Encode()
	if s.Hold {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = fmt.Fprintf(w, `<!doctype html><html lang="en"><title>Test provider</title><a id="continue" href="%s">Continue</a></html>`, html.EscapeString(back.String()))
		return
	}
	http.Redirect(w, r, back.String(), http.StatusFound)
}

// token exchanges a code for an ID token, once, if the code_verifier
// hashes to the code's challenge. A browser calls it from the console's
// origin, so it answers CORS.
func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	if r.Method == http.MethodOptions {
		w.Header().Set("Access-Control-Allow-Methods", "POST")
		w.Header().Set("Access-Control-Allow-Headers", "Content-Type")
		return
	}
	refuse := func(code, why string) {
		p.mu.Lock()
		p.refused = append(p.refused, why)
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": why})
	}
	if r.Method != http.MethodPost || r.ParseForm() != nil {
		refuse("invalid_request", "want a POST of a form")
		return
	}
	f := r.PostForm
	if f.Get("grant_type") == "refresh_token" {
		p.refresh(w, f.Get("refresh_token"), f.Get("client_id"), refuse)
		return
	}
	if f.Get("grant_type") != "authorization_code" {
		refuse("unsupported_grant_type", "grant_type "+f.Get("grant_type")+": want authorization_code or refresh_token")
		return
	}
	p.mu.Lock()
	g, ok := p.codes[f.Get("code")]
	delete(p.codes, f.Get("code"))
	s := p.signIn
	p.mu.Unlock()
	sum := sha256.Sum256([]byte(f.Get("code_verifier")))
	switch {
	case !ok:
		refuse("invalid_grant", "code: unknown or already used")
		return
	case s == nil || f.Get("client_id") != g.clientID:
		refuse("invalid_client", "client_id "+f.Get("client_id")+": not the code's client")
		return
	case f.Get("redirect_uri") != g.redirectURI:
		refuse("invalid_grant", "redirect_uri "+f.Get("redirect_uri")+": not the code's")
		return
	case f.Get("code_verifier") == "" || B64(sum[:]) != g.challenge:
		refuse("invalid_grant", "code_verifier: does not match the code_challenge")
		return
	}
	p.issue(w, s, g.clientID, g.nonce, refuse)
}

// refresh renews a sign-in with a refresh token, once per token.
func (p *Provider) refresh(w http.ResponseWriter, token, clientID string, refuse func(code, why string)) {
	p.mu.Lock()
	owner, ok := p.refreshTokens[token]
	delete(p.refreshTokens, token)
	s := p.signIn
	p.mu.Unlock()
	switch {
	case !ok:
		refuse("invalid_grant", "refresh_token: unknown or already used")
		return
	case s == nil || clientID != owner:
		refuse("invalid_client", "client_id "+clientID+": not the refresh token's client")
		return
	}
	p.mu.Lock()
	p.refreshes++
	p.mu.Unlock()
	p.issue(w, s, clientID, "", refuse)
}

// issue answers an ID token of s's user for client, valid for s's
// lifetime, with a refresh token when s gives them.
func (p *Provider) issue(w http.ResponseWriter, s *SignIn, clientID, nonce string, refuse func(code, why string)) {
	claims := map[string]any{}
	for k, v := range s.Claims {
		claims[k] = v
	}
	lifetime := s.Lifetime
	if lifetime <= 0 {
		lifetime = time.Hour
	}
	now := time.Now()
	claims["iss"], claims["aud"] = p.srv.URL, clientID
	claims["iat"], claims["exp"] = now.Unix(), now.Add(lifetime).Unix()
	if nonce != "" {
		claims["nonce"] = nonce
	}
	key, kid := p.Key()
	idToken, err := sign(key, kid, claims)
	if err != nil {
		refuse("server_error", err.Error())
		return
	}
	answer := map[string]any{"id_token": idToken, "access_token": randomString(), "token_type": "Bearer", "expires_in": int(lifetime.Seconds())}
	if s.Refresh {
		rt := randomString()
		p.mu.Lock()
		p.refreshTokens[rt] = clientID
		p.mu.Unlock()
		answer["refresh_token"] = rt
	}
	writeJSON(w, answer)
}

// randomString is 32 random bytes, base64url.
func randomString() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return B64(b)
}
