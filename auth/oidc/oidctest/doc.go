// Package oidctest runs a local OpenID provider for tests: discovery, a key
// set with one RSA key that can be rotated, and a signer of RS256 tokens.
// Tests of the verifier (package oidc) and of the servers that accept its
// tokens (sundial api) share it.
package oidctest
