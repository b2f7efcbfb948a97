// Command certs writes the certificates and keystores of the secured local
// stack (deploy/local/secure.sh), generated here with crypto/x509 rather than
// downloaded, so that no key of the stack ever left this machine.
//
//	go run ./deploy/local/certs -dir .stack/secure/tls
//
// It writes, in -dir:
//
//   - ca.pem, ca-key.pem: the stack's own certificate authority.
//   - server.pem, server-key.pem: the servers' certificate, signed by that CA,
//     for 127.0.0.1, ::1 and localhost (Redis reads these PEM files).
//   - server.p12: the same key and chain as a PKCS#12 keystore for Kafka and
//     Cassandra; truststore.p12: the CA alone, for the brokers that verify
//     client certificates. Their password is in keystore.password.
//   - client.pem, client-key.pem: a client certificate (CN sundial) signed by
//     the CA, for mutual TLS.
//   - other-ca.pem: a second, unrelated CA that signed nothing the servers
//     present. A client that trusts only it must fail with an unknown
//     authority: the "unknown CA" case of the secured-stack test.
//   - other-client.pem, other-client-key.pem: a client certificate signed by
//     that unrelated CA, which a server that verifies client certificates
//     must refuse.
//
// Invariants: an existing, complete set is left as it is (the keystore
// password and the server key stay stable across restarts), so the command is
// safe to run before every start; a partial set is replaced whole. Private
// keys and the password file are written with mode 0600. Certificates are
// valid from an hour ago (clock skew between the tools) for -days days.
package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"software.sslmate.com/src/go-pkcs12"
)

// files lists what a complete set holds; a set missing any of them is
// generated anew.
var files = []string{
	"ca.pem", "ca-key.pem", "server.pem", "server-key.pem", "server.p12",
	"truststore.p12", "keystore.password", "client.pem", "client-key.pem", "other-ca.pem",
	"other-client.pem", "other-client-key.pem",
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("certs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "folder to write the certificates and keystores into (created if missing)")
	days := fs.Int("days", 825, "validity of the certificates in days")
	force := fs.Bool("force", false, "generate a new set even when a complete one exists")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var problems []error
	if *dir == "" {
		problems = append(problems, errors.New("-dir: required"))
	}
	if *days < 1 {
		problems = append(problems, fmt.Errorf("-days: must be at least 1, got %d", *days))
	}
	if fs.NArg() > 0 {
		problems = append(problems, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if len(problems) > 0 {
		fmt.Fprintln(stderr, "certs:", errors.Join(problems...))
		return 2
	}
	if !*force && complete(*dir) {
		fmt.Fprintf(stdout, "certs: %s has a complete set; kept\n", *dir)
		return 0
	}
	now := time.Now()
	if err := generate(*dir, now.Add(-time.Hour), now.AddDate(0, 0, *days)); err != nil {
		fmt.Fprintln(stderr, "certs:", err)
		return 1
	}
	fmt.Fprintf(stdout, "certs: wrote a new CA, server and client certificates, and an unrelated CA and client into %s\n", *dir)
	return 0
}

func complete(dir string) bool {
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return false
		}
	}
	return true
}

// issued is a certificate with its key.
type issued struct {
	cert *x509.Certificate
	der  []byte
	key  *ecdsa.PrivateKey
}

func generate(dir string, notBefore, notAfter time.Time) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	ca, err := newCA("Sundial local stack CA", notBefore, notAfter)
	if err != nil {
		return err
	}
	other, err := newCA("Unrelated CA (Sundial tests)", notBefore, notAfter)
	if err != nil {
		return err
	}
	server, err := ca.sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "localhost", Organization: []string{"Sundial local stack"}},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}, notBefore, notAfter)
	if err != nil {
		return fmt.Errorf("server certificate: %w", err)
	}
	clientTemplate := func() *x509.Certificate {
		return &x509.Certificate{
			Subject:     pkix.Name{CommonName: "sundial", Organization: []string{"Sundial local stack"}},
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
	}
	client, err := ca.sign(clientTemplate(), notBefore, notAfter)
	if err != nil {
		return fmt.Errorf("client certificate: %w", err)
	}
	otherClient, err := other.sign(clientTemplate(), notBefore, notAfter)
	if err != nil {
		return fmt.Errorf("client certificate of the unrelated CA: %w", err)
	}

	pass := make([]byte, 16)
	if _, err := rand.Read(pass); err != nil {
		return fmt.Errorf("keystore password: %w", err)
	}
	password := hex.EncodeToString(pass)
	keystore, err := pkcs12.Modern.Encode(server.key, server.cert, []*x509.Certificate{ca.cert}, password)
	if err != nil {
		return fmt.Errorf("server.p12: %w", err)
	}
	truststore, err := pkcs12.Modern.EncodeTrustStore([]*x509.Certificate{ca.cert}, password)
	if err != nil {
		return fmt.Errorf("truststore.p12: %w", err)
	}

	out := []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{"ca.pem", certPEM(ca.der), 0o644},
		{"ca-key.pem", keyPEM(ca.key), 0o600},
		{"server.pem", append(certPEM(server.der), certPEM(ca.der)...), 0o644},
		{"server-key.pem", keyPEM(server.key), 0o600},
		{"server.p12", keystore, 0o600},
		{"truststore.p12", truststore, 0o600},
		{"client.pem", certPEM(client.der), 0o644},
		{"client-key.pem", keyPEM(client.key), 0o600},
		{"other-ca.pem", certPEM(other.der), 0o644},
		{"other-client.pem", certPEM(otherClient.der), 0o644},
		{"other-client-key.pem", keyPEM(otherClient.key), 0o600},
	}
	for _, f := range out {
		if err := writeFile(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return err
		}
	}
	// Last, so that a set interrupted before this point is incomplete and
	// generated anew by the next run.
	return writeFile(filepath.Join(dir, "keystore.password"), []byte(password), 0o600)
}

func newCA(name string, notBefore, notAfter time.Time) (issued, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return issued{}, fmt.Errorf("%s key: %w", name, err)
	}
	serial, err := serialNumber()
	if err != nil {
		return issued{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"Sundial local stack"}},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return issued{}, fmt.Errorf("%s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return issued{}, fmt.Errorf("%s: %w", name, err)
	}
	return issued{cert: cert, der: der, key: key}, nil
}

// sign issues a certificate from tmpl, with a new key, signed by ca.
func (ca issued) sign(tmpl *x509.Certificate, notBefore, notAfter time.Time) (issued, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return issued{}, fmt.Errorf("key: %w", err)
	}
	if tmpl.SerialNumber, err = serialNumber(); err != nil {
		return issued{}, err
	}
	tmpl.NotBefore, tmpl.NotAfter = notBefore, notAfter
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), crypto.Signer(ca.key))
	if err != nil {
		return issued{}, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return issued{}, err
	}
	return issued{cert: cert, der: der, key: key}, nil
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return n, nil
}

func certPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// keyPEM encodes a key as unencrypted PKCS#8, which Redis, Go and Java all
// read.
func keyPEM(key *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		// An ECDSA P-256 key always marshals; failing here is a bug.
		panic(fmt.Sprintf("certs: marshal key: %v", err))
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// writeFile replaces path atomically, so a reader never sees half a key.
func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return fmt.Errorf("chmod %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
