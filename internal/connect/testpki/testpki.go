package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// PKI is PEM files in a test's temporary directory: a CA, a server
// certificate for 127.0.0.1 and localhost, a client certificate, and a second
// CA that signed neither.
type PKI struct {
	CA, OtherCA           string
	ServerCert, ServerKey string
	ClientCert, ClientKey string
	serverPair            tls.Certificate
	caPool                *x509.CertPool
}

// New writes a fresh PKI; the files are removed when the test ends.
func New(t testing.TB) PKI {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
		return p
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		return k
	}
	serial := int64(0)
	template := func(cn string) *x509.Certificate {
		serial++
		return &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		}
	}
	newCA := func(name string) (*x509.Certificate, *ecdsa.PrivateKey, string) {
		key := newKey()
		tmpl := template(name)
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage = x509.KeyUsageCertSign
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		require.NoError(t, err)
		cert, err := x509.ParseCertificate(der)
		require.NoError(t, err)
		return cert, key, write(name+".pem", "CERTIFICATE", der)
	}
	leaf := func(name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, usage x509.ExtKeyUsage) (string, string, tls.Certificate) {
		key := newKey()
		tmpl := template(name)
		tmpl.DNSNames, tmpl.IPAddresses = []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		require.NoError(t, err)
		kder, err := x509.MarshalECPrivateKey(key)
		require.NoError(t, err)
		certFile, keyFile := write(name+".pem", "CERTIFICATE", der), write(name+"-key.pem", "EC PRIVATE KEY", kder)
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		require.NoError(t, err)
		return certFile, keyFile, pair
	}
	ca, caKey, caFile := newCA("ca")
	_, _, otherFile := newCA("other-ca")
	c := PKI{CA: caFile, OtherCA: otherFile, caPool: x509.NewCertPool()}
	c.caPool.AddCert(ca)
	c.ServerCert, c.ServerKey, c.serverPair = leaf("server", ca, caKey, x509.ExtKeyUsageServerAuth)
	c.ClientCert, c.ClientKey, _ = leaf("client", ca, caKey, x509.ExtKeyUsageClientAuth)
	return c
}

// ServerTLS is a server's configuration; mutual requires the client's
// certificate, signed by the test CA.
func (c PKI) ServerTLS(mutual bool) *tls.Config {
	cfg := &tls.Config{Certificates: []tls.Certificate{c.serverPair}, MinVersion: tls.VersionTLS12}
	if mutual {
		cfg.ClientAuth, cfg.ClientCAs = tls.RequireAndVerifyClientCert, c.caPool
	}
	return cfg
}
