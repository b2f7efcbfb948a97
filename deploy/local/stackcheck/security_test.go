package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/internal/connect"
)

func TestReadSecret(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name, content, want, wantErr string
	}{
		{name: "first line, newline dropped", content: "s3cret\n", want: "s3cret"},
		{name: "CRLF", content: "s3cret\r\nignored\n", want: "s3cret"},
		{name: "no newline", content: "s3cret", want: "s3cret"},
		{name: "empty", content: "\n", wantErr: "empty"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(dir, string(rune('a'+i)))
			require.NoError(t, os.WriteFile(path, []byte(tc.content), 0o600))
			got, err := readSecret(path)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	_, err := readSecret(filepath.Join(dir, "missing"))
	require.ErrorContains(t, err, "password file")
}

func TestTLSConfig(t *testing.T) {
	t.Parallel()
	cfg, err := security{}.tlsConfig()
	require.NoError(t, err)
	assert.Nil(t, cfg, "no CA: plaintext")

	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate"), 0o644))
	_, err = security{caFile: notPEM}.tlsConfig()
	require.ErrorContains(t, err, "no PEM certificate")
}

func TestCQLString(t *testing.T) {
	t.Parallel()
	assert.Equal(t, `'plain'`, cqlString("plain"))
	assert.Equal(t, `'it''s'`, cqlString("it's"))
}

// TestSecurityKafka: the probes reach a secured broker with the settings
// every sundial command uses: the stack's CA and SCRAM-SHA-512 with the
// user's password read from its file.
func TestSecurityKafka(t *testing.T) {
	t.Parallel()
	k, err := security{}.kafka("127.0.0.1:9092")
	require.NoError(t, err)
	assert.Equal(t, connect.Kafka{Brokers: []string{"127.0.0.1:9092"}}, k, "the plain stack: no TLS, no SASL")

	pass := filepath.Join(t.TempDir(), "pass")
	require.NoError(t, os.WriteFile(pass, []byte("s3cret\n"), 0o600))
	k, err = security{caFile: "/ca.pem", kafkaUser: "sundial", kafkaPasswordFile: pass}.kafka("broker:9093")
	require.NoError(t, err)
	assert.Equal(t, connect.Kafka{Brokers: []string{"broker:9093"}, TLS: connect.TLS{CAFile: "/ca.pem"},
		SASLMechanism: connect.MechanismScramSHA512, SASLUsername: "sundial", SASLPassword: "s3cret"}, k)

	_, err = security{kafkaUser: "sundial", kafkaPasswordFile: filepath.Join(t.TempDir(), "missing")}.kafka("broker:9093")
	require.ErrorContains(t, err, "kafka password file")
}
