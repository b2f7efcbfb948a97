package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"software.sslmate.com/src/go-pkcs12"
)

// TestCertsWritesAVerifiableSet checks what the secured stack relies on:
// the server certificate verifies for 127.0.0.1 and localhost against ca.pem
// and not against other-ca.pem, the client certificate is for client
// authentication, the keystores open with the password written beside
// them, and a second run keeps the set while -force replaces it.
func TestCertsWritesAVerifiableSet(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "tls")
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"-dir", dir}, &out, &errOut), errOut.String())

	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		return b
	}
	pool := func(name string) *x509.CertPool {
		p := x509.NewCertPool()
		require.True(t, p.AppendCertsFromPEM(read(name)))
		return p
	}
	server, err := tls.X509KeyPair(read("server.pem"), read("server-key.pem"))
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(server.Certificate[0])
	require.NoError(t, err)
	for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
		_, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: pool("ca.pem")})
		assert.NoError(t, err, "server certificate for %s", host)
	}
	_, err = leaf.Verify(x509.VerifyOptions{DNSName: "127.0.0.1", Roots: pool("other-ca.pem")})
	var unknown x509.UnknownAuthorityError
	require.ErrorAs(t, err, &unknown, "the unrelated CA must not verify the server")

	client, err := tls.X509KeyPair(read("client.pem"), read("client-key.pem"))
	require.NoError(t, err)
	cleaf, err := x509.ParseCertificate(client.Certificate[0])
	require.NoError(t, err)
	_, err = cleaf.Verify(x509.VerifyOptions{Roots: pool("ca.pem"), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err)

	other, err := tls.X509KeyPair(read("other-client.pem"), read("other-client-key.pem"))
	require.NoError(t, err)
	oleaf, err := x509.ParseCertificate(other.Certificate[0])
	require.NoError(t, err)
	_, err = oleaf.Verify(x509.VerifyOptions{Roots: pool("ca.pem"), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.ErrorAs(t, err, &unknown, "the stack's CA must not verify the unrelated client")

	password := string(read("keystore.password"))
	_, cert, chain, err := pkcs12.DecodeChain(read("server.p12"), password)
	require.NoError(t, err)
	assert.Equal(t, leaf.Raw, cert.Raw)
	require.Len(t, chain, 1)
	trusted, err := pkcs12.DecodeTrustStore(read("truststore.p12"), password)
	require.NoError(t, err)
	require.Len(t, trusted, 1)
	assert.Equal(t, chain[0].Raw, trusted[0].Raw)

	for _, name := range []string{"ca-key.pem", "server-key.pem", "client-key.pem", "other-client-key.pem", "server.p12", "keystore.password"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), name)
	}

	ca := read("ca.pem")
	require.Equal(t, 0, run([]string{"-dir", dir}, &out, &errOut))
	assert.Equal(t, ca, read("ca.pem"), "a complete set is kept")
	require.Equal(t, 0, run([]string{"-dir", dir, "-force"}, &out, &errOut))
	assert.NotEqual(t, ca, read("ca.pem"), "-force writes a new set")

	require.NoError(t, os.Remove(filepath.Join(dir, "other-ca.pem")))
	ca = read("ca.pem")
	require.Equal(t, 0, run([]string{"-dir", dir}, &out, &errOut))
	assert.NotEqual(t, ca, read("ca.pem"), "an incomplete set is replaced whole")
	block, _ := pem.Decode(read("other-ca.pem"))
	require.NotNil(t, block)
}

func TestCertsUsage(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	require.Equal(t, 2, run([]string{"-days", "0", "extra"}, &out, &errOut))
	for _, want := range []string{"-dir: required", "-days: must be at least 1", `unexpected arguments ["extra"]`} {
		assert.Contains(t, errOut.String(), want)
	}
}
