// Package oidctest runs a local OpenID provider for tests: discovery, a key
// set with one RSA key that can be rotated, a signer of RS256 tokens, and
// a browser sign-in (authorization code with PKCE, S256): /authorize
// approves at once, /token gives an ID token for a code once, and only to
// the code_verifier whose hash is the code's challenge; with
// SignIn.Refresh, a refresh token too, which /token takes once for a new
// ID token (SignIn.Lifetime sets how long each is valid).
// Tests of the verifier (package oidc) and of the servers that accept its
// tokens (sundial api) share it.
package oidctest
