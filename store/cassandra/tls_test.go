package cassandra_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/internal/connect/testpki"
	"github.com/sundialhq/sundial/store/cassandra"
)

// tlsListener accepts TLS connections and completes the handshake, then
// hangs up: enough for a client to verify the certificate.
func tlsListener(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).HandshakeContext(t.Context())
			_ = c.Close()
		}
	})
	t.Cleanup(func() {
		_ = l.Close()
		wg.Wait()
	})
	return l.Addr().String()
}

func TestTLSUnknownAuthorityIsNamed(t *testing.T) {
	t.Parallel()
	pki := testpki.New(t)
	host := tlsListener(t, pki.ServerTLS(false))
	pem, err := os.ReadFile(pki.OtherCA)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(pem))
	cfg := cassandra.Config{Hosts: []string{host}, Keyspace: "tls", ConnectTimeout: 5 * time.Second,
		TLS: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err = cassandra.Open(ctx, cfg)
	require.Error(t, err)
	t.Logf("open: %v", err)
	assert.True(t, errors.Is(err, cassandra.ErrUnreachable), "%v", err)
	assert.ErrorContains(t, err, "x509: certificate signed by unknown authority")
	assert.ErrorContains(t, err, host)
}
