package connect

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// TLS is a client's TLS settings for one backend.
type TLS struct {
	// Enabled turns TLS on. Any other field set turns it on too: a CA file
	// or a client certificate means nothing over plain TCP.
	Enabled bool
	// CAFile is a PEM bundle of the authorities that sign the servers'
	// certificates; empty means the system's roots.
	CAFile string
	// CertFile and KeyFile are the client's PEM certificate and key, for
	// mutual TLS; both or neither.
	CertFile string
	KeyFile  string
	// ServerName is the name the servers' certificates must carry; empty
	// means the host name dialled.
	ServerName string
}

// On reports whether TLS is used.
func (t TLS) On() bool {
	return t.Enabled || t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != ""
}

// Config returns the crypto/tls configuration, or nil when TLS is off.
// backend names the settings in errors ("kafka tls ca file: ...").
func (t TLS) Config(backend string) (*tls.Config, error) {
	if !t.On() {
		return nil, nil
	}
	var errs []error
	bad := func(field string, err error) {
		errs = append(errs, fmt.Errorf("--%s-tls-%s: %w", backend, field, err))
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			bad("ca-file", err)
		} else {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				bad("ca-file", fmt.Errorf("%s: no PEM certificate in it", t.CAFile))
			}
			cfg.RootCAs = pool
		}
	}
	switch {
	case t.CertFile != "" && t.KeyFile != "":
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			bad("cert-file", err)
		} else {
			cfg.Certificates = []tls.Certificate{cert}
		}
	case t.CertFile != "":
		bad("key-file", errors.New("required with a cert file"))
	case t.KeyFile != "":
		bad("cert-file", errors.New("required with a key file"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return cfg, nil
}
