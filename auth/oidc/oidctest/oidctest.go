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
}

// grant is what an authorization code was issued for.
type grant struct {
	clientID, redirectURI, challenge, nonce string
}

// New starts a provider whose key id is "key-1"; it stops when t ends.
func New(t testing.TB) *Provider {
	t.Helper()
	p := &Provider{key: NewKey(t), kid: "key-1", codes: map[string]grant{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{
			"issuer": p.srv.URL, "jwks_uri": p.srv.URL + "/keys",
			"authorization_endpoint": p.srv.URL + "/authorize", "token_endpoint": p.srv.URL + "/token",
			"response_types_supported": []string{"code"}, "code_challenge_methods_supported": []string{"S256"},
			"id_token_signing_alg_values_supported": []string{"RS256"},
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
	if f.Get("grant_type") != "authorization_code" {
		refuse("unsupported_grant_type", "grant_type "+f.Get("grant_type")+": want authorization_code")
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
	claims := map[string]any{}
	for k, v := range s.Claims {
		claims[k] = v
	}
	now := time.Now()
	claims["iss"], claims["aud"] = p.srv.URL, g.clientID
	claims["iat"], claims["exp"] = now.Add(-time.Minute).Unix(), now.Add(time.Hour).Unix()
	if g.nonce != "" {
		claims["nonce"] = g.nonce
	}
	key, kid := p.Key()
	idToken, err := sign(key, kid, claims)
	if err != nil {
		refuse("server_error", err.Error())
		return
	}
	writeJSON(w, map[string]any{"id_token": idToken, "access_token": randomString(), "token_type": "Bearer", "expires_in": 3600})
}

// randomString is 32 random bytes, base64url.
func randomString() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return B64(b)
}
