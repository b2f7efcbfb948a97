package oidctest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Provider is a local OpenID provider. It counts the fetches of its key set.
type Provider struct {
	srv *httptest.Server

	mu         sync.Mutex
	key        *rsa.PrivateKey
	kid        string
	keyFetches int
}

// New starts a provider whose key id is "key-1"; it stops when t ends.
func New(t testing.TB) *Provider {
	t.Helper()
	p := &Provider{key: NewKey(t), kid: "key-1"}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{
			"issuer": p.srv.URL, "jwks_uri": p.srv.URL + "/keys",
			"authorization_endpoint": p.srv.URL + "/auth", "token_endpoint": p.srv.URL + "/token",
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
	header, err := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": kid})
	if err != nil {
		t.Fatalf("header: %v", err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatalf("claims: %v", err)
	}
	signing := B64(header) + "." + B64(payload)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	return signing + "." + B64(sig)
}

// B64 is the unpadded URL-safe base64 of JWTs.
func B64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
