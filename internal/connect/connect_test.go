package connect

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/goleak"

	"github.com/sundialhq/sundial/internal/connect/testpki"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// pingTimeout bounds every check against a test server: a check that does
// not fail or succeed by then is a finding, the error says which.
const pingTimeout = 20 * time.Second

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func TestTLSConfig(t *testing.T) {
	t.Parallel()
	c := testpki.New(t)
	notPEM := writeFile(t, "ca.txt", "not a certificate")
	tests := []struct {
		name    string
		tls     TLS
		wantErr string // substring; "" for success
		check   func(t *testing.T, cfg TLS)
	}{
		{name: "off", tls: TLS{}},
		{name: "enabled, system roots", tls: TLS{Enabled: true}},
		{name: "a server name turns it on", tls: TLS{ServerName: "kafka.internal"}},
		{name: "ca and client certificate", tls: TLS{CAFile: c.CA, CertFile: c.ClientCert, KeyFile: c.ClientKey}},
		{name: "cert without key", tls: TLS{CertFile: c.ClientCert}, wantErr: "kafka-tls-key-file: required with a cert file"},
		{name: "key without cert", tls: TLS{KeyFile: c.ClientKey}, wantErr: "kafka-tls-cert-file: required with a key file"},
		{name: "missing ca file", tls: TLS{CAFile: filepath.Join(t.TempDir(), "none.pem")}, wantErr: "kafka-tls-ca-file: open"},
		{name: "ca file without a certificate", tls: TLS{CAFile: notPEM}, wantErr: "no PEM certificate"},
		{name: "key of another certificate", tls: TLS{CertFile: c.ClientCert, KeyFile: c.ServerKey}, wantErr: "kafka-tls-cert-file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := tt.tls.Config("kafka")
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			if !tt.tls.On() {
				assert.Nil(t, cfg)
				return
			}
			require.NotNil(t, cfg)
			assert.Equal(t, tt.tls.ServerName, cfg.ServerName)
			assert.Equal(t, tt.tls.CAFile != "", cfg.RootCAs != nil, "RootCAs")
			assert.Len(t, cfg.Certificates, map[bool]int{true: 1}[tt.tls.CertFile != ""])
		})
	}
}

func TestKafkaOptionsValidation(t *testing.T) {
	t.Parallel()
	token := writeFile(t, "token", "tok\n")
	brokers := []string{"127.0.0.1:9092"}
	tests := []struct {
		name    string
		k       Kafka
		wantErr []string // substrings, all reported at once; nil for success
	}{
		{name: "plain text", k: Kafka{Brokers: brokers}},
		{name: "PLAIN", k: Kafka{Brokers: brokers, SASLMechanism: "PLAIN", SASLUsername: "u", SASLPassword: "a-long-password"}},
		{name: "mechanism in lower case", k: Kafka{Brokers: brokers, SASLMechanism: "scram-sha-512", SASLUsername: "u", SASLPassword: "a-long-password"}},
		{name: "OAUTHBEARER", k: Kafka{Brokers: brokers, SASLMechanism: "OAUTHBEARER", SASLTokenFile: token}},
		{name: "no brokers", k: Kafka{}, wantErr: []string{"kafka-brokers"}},
		{name: "empty broker", k: Kafka{Brokers: []string{"a:1", " "}}, wantErr: []string{"kafka-brokers", "empty address"}},
		{name: "unknown mechanism", k: Kafka{Brokers: brokers, SASLMechanism: "GSSAPI"}, wantErr: []string{`kafka-sasl-mechanism "GSSAPI"`}},
		{name: "user without mechanism", k: Kafka{Brokers: brokers, SASLUsername: "u", SASLPassword: "a-long-password"}, wantErr: []string{"kafka-sasl-mechanism: required"}},
		{name: "SCRAM without user or password", k: Kafka{Brokers: brokers, SASLMechanism: "SCRAM-SHA-256"}, wantErr: []string{"kafka-sasl-username", "kafka-sasl-password"}},
		{name: "PLAIN with a token", k: Kafka{Brokers: brokers, SASLMechanism: "PLAIN", SASLUsername: "u", SASLPassword: "a-long-password", SASLTokenFile: token}, wantErr: []string{"kafka-sasl-token-file: only for OAUTHBEARER"}},
		{name: "OAUTHBEARER without token", k: Kafka{Brokers: brokers, SASLMechanism: "OAUTHBEARER"}, wantErr: []string{"kafka-sasl-token-file: required"}},
		{name: "OAUTHBEARER with a missing token file", k: Kafka{Brokers: brokers, SASLMechanism: "OAUTHBEARER", SASLTokenFile: token + ".missing"}, wantErr: []string{"kafka-sasl-token-file: open"}},
		{name: "bad TLS and bad SASL together", k: Kafka{Brokers: brokers, TLS: TLS{CertFile: "x"}, SASLMechanism: "NONE"}, wantErr: []string{"kafka-tls-key-file", "kafka-sasl-mechanism"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts, err := tt.k.Options()
			if tt.wantErr == nil {
				require.NoError(t, err)
				assert.NotEmpty(t, opts)
				return
			}
			require.Error(t, err)
			for _, w := range tt.wantErr {
				assert.Contains(t, err.Error(), w)
			}
			if tt.k.SASLPassword != "" {
				assert.NotContains(t, err.Error(), tt.k.SASLPassword.Reveal())
			}
		})
	}
}

// TestOAuthBearerRereadsToken checks the mechanism sends the token in the
// file at each authentication, so a rotated token is used.
func TestOAuthBearerRereadsToken(t *testing.T) {
	t.Parallel()
	file := writeFile(t, "token", "first-token\n")
	mech, err := Kafka{Brokers: []string{"x:1"}, SASLMechanism: "OAUTHBEARER", SASLTokenFile: file}.mechanism()
	require.NoError(t, err)
	require.Equal(t, "OAUTHBEARER", mech.Name())
	_, msg, err := mech.Authenticate(t.Context(), "x:1")
	require.NoError(t, err)
	assert.Contains(t, string(msg), "auth=Bearer first-token")
	require.NoError(t, os.WriteFile(file, []byte("second-token"), 0o600))
	_, msg, err = mech.Authenticate(t.Context(), "x:1")
	require.NoError(t, err)
	assert.Contains(t, string(msg), "auth=Bearer second-token")
}

// fakeKafka starts an in-process Kafka with the given options.
func fakeKafka(t *testing.T, opts ...kfake.Opt) []string {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

func pingKafka(t *testing.T, k Kafka) error {
	t.Helper()
	opts, err := k.Options()
	require.NoError(t, err)
	// Without retries a refused handshake is reported at once; the deadline
	// is the bound a misconfigured command would wait.
	ctx, cancel := context.WithTimeout(t.Context(), pingTimeout)
	defer cancel()
	return PingKafka(ctx, opts)
}

func TestKafkaSASL(t *testing.T) {
	t.Parallel()
	for _, mech := range []string{MechanismPlain, MechanismScramSHA256, MechanismScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			t.Parallel()
			brokers := fakeKafka(t, kfake.EnableSASL(), kfake.Superuser(mech, "sundial", "right-password"))
			k := Kafka{Brokers: brokers, SASLMechanism: mech, SASLUsername: "sundial", SASLPassword: "right-password"}
			require.NoError(t, pingKafka(t, k))

			k.SASLPassword = "wrong-password"
			err := pingKafka(t, k)
			require.Error(t, err)
			t.Logf("wrong password: %v", err)
			// The in-process broker hangs up on a failed authentication;
			// Kafka answers SASL_AUTHENTICATION_FAILED (TestDescribeKafka).
			assert.True(t, strings.HasPrefix(err.Error(), "kafka: the broker closed the connection (wrong SASL credentials"), "got %q", err)
			assert.NotContains(t, err.Error(), "wrong-password")
		})
	}
}

func TestDescribeKafka(t *testing.T) {
	t.Parallel()
	answer := fmt.Errorf("Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512: %w", kerr.SaslAuthenticationFailed)
	assert.Equal(t, "SASL authentication failed: "+answer.Error(), describeKafka(answer).Error())
	other := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	assert.Equal(t, other, describeKafka(other))
}

func TestKafkaTLS(t *testing.T) {
	t.Parallel()
	c := testpki.New(t)
	brokers := fakeKafka(t, kfake.TLS(c.ServerTLS(true)))
	tests := []struct {
		name    string
		tls     TLS
		wantErr string
	}{
		{name: "mutual TLS", tls: TLS{CAFile: c.CA, CertFile: c.ClientCert, KeyFile: c.ClientKey}},
		{name: "unknown authority", tls: TLS{CAFile: c.OtherCA, CertFile: c.ClientCert, KeyFile: c.ClientKey}, wantErr: "x509: certificate signed by unknown authority"},
		{name: "wrong server name", tls: TLS{CAFile: c.CA, CertFile: c.ClientCert, KeyFile: c.ClientKey, ServerName: "kafka.elsewhere"}, wantErr: "x509: certificate is valid for localhost"},
		{name: "no client certificate", tls: TLS{CAFile: c.CA}, wantErr: "kafka: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := pingKafka(t, Kafka{Brokers: brokers, TLS: tt.tls})
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			t.Logf("%s: %v", tt.name, err)
			assert.True(t, strings.HasPrefix(err.Error(), "kafka: "), "got %q", err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestRedisOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		r       Redis
		want    string   // "single", "cluster" or "sentinel"
		wantErr []string // substrings; nil for success
	}{
		{name: "one node", r: Redis{Addrs: []string{"127.0.0.1:6379"}}, want: "single"},
		{name: "one seed of a cluster", r: Redis{Addrs: []string{"127.0.0.1:7001"}, Cluster: true}, want: "cluster"},
		{name: "several seeds", r: Redis{Addrs: []string{"127.0.0.1:7001, 127.0.0.1:7002", "127.0.0.1:7003"}}, want: "cluster"},
		{name: "sentinel", r: Redis{SentinelMaster: "mymaster", SentinelAddrs: []string{"127.0.0.1:26379,127.0.0.1:26380"}}, want: "sentinel"},
		{name: "ACL user", r: Redis{Addrs: []string{"127.0.0.1:6379"}, Username: "sundial", Password: "p"}, want: "single"},
		{name: "nothing", r: Redis{}, wantErr: []string{"redis-addr: required"}},
		{name: "empty address", r: Redis{Addrs: []string{"127.0.0.1:7001,,127.0.0.1:7002"}}, wantErr: []string{"redis-addr", "empty address"}},
		{name: "sentinel without sentinels", r: Redis{SentinelMaster: "m"}, wantErr: []string{"redis-sentinel-addrs: required"}},
		{name: "sentinels without master", r: Redis{SentinelAddrs: []string{"127.0.0.1:26379"}}, wantErr: []string{"redis-sentinel-master: required"}},
		{name: "sentinel and addr", r: Redis{SentinelMaster: "m", SentinelAddrs: []string{"a:1"}, Addrs: []string{"b:2"}, Cluster: true}, wantErr: []string{"redis-addr: not used", "redis-cluster"}},
		{name: "user without password", r: Redis{Addrs: []string{"a:1"}, Username: "u"}, wantErr: []string{"redis-password: required"}},
		{name: "bad TLS", r: Redis{Addrs: []string{"a:1"}, TLS: TLS{KeyFile: "k"}}, wantErr: []string{"redis-tls-cert-file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := tt.r.Client()
			if tt.wantErr != nil {
				require.Error(t, err)
				for _, w := range tt.wantErr {
					assert.Contains(t, err.Error(), w)
				}
				return
			}
			require.NoError(t, err)
			defer c.Close()
			got := "?"
			switch c.(type) {
			case *redis.ClusterClient:
				got = "cluster"
			case *redis.Client:
				got = "single"
				if tt.r.SentinelMaster != "" {
					got = "sentinel" // a FailoverClient is a *redis.Client
				}
			}
			assert.Equal(t, tt.want, got)
			o, err := tt.r.Options()
			require.NoError(t, err)
			assert.Equal(t, tt.r.SentinelMaster, o.MasterName)
			assert.Equal(t, tt.r.Username, o.Username)
		})
	}
}

func TestRedisAuthAndTLS(t *testing.T) {
	t.Parallel()
	c := testpki.New(t)
	srv, err := miniredis.RunTLS(c.ServerTLS(false))
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	srv.RequireUserAuth("sundial", "right-password")
	tests := []struct {
		name    string
		r       Redis
		wantErr string
	}{
		{name: "ACL user over TLS", r: Redis{Username: "sundial", Password: "right-password", TLS: TLS{CAFile: c.CA}}},
		{name: "wrong password", r: Redis{Username: "sundial", Password: "wrong-password", TLS: TLS{CAFile: c.CA}}, wantErr: "WRONGPASS"},
		{name: "unknown authority", r: Redis{Username: "sundial", Password: "right-password", TLS: TLS{CAFile: c.OtherCA}}, wantErr: "x509: certificate signed by unknown authority"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.r.Addrs = []string{srv.Addr()}
			cl, err := tt.r.Client()
			require.NoError(t, err)
			defer cl.Close()
			ctx, cancel := context.WithTimeout(t.Context(), pingTimeout)
			defer cancel()
			err = PingRedis(ctx, cl)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			t.Logf("%s: %v", tt.name, err)
			assert.True(t, strings.HasPrefix(err.Error(), "redis: "), "got %q", err)
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.NotContains(t, err.Error(), tt.r.Password.Reveal())
		})
	}
}

func TestSecretNeverPrints(t *testing.T) {
	t.Parallel()
	const value = "s3cret-value"
	k := Kafka{Brokers: []string{"a:1"}, SASLMechanism: "PLAIN", SASLUsername: "u", SASLPassword: value}
	r := Redis{Addrs: []string{"a:1"}, Password: value}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "kafka", k, "password", k.SASLPassword, "redis", r)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("config", "kafka", k, "password", k.SASLPassword)
	for _, s := range []string{
		fmt.Sprint(k.SASLPassword), fmt.Sprintf("%v %+v %#v %s %q", k, k, k, k.SASLPassword, k.SASLPassword),
		fmt.Sprintf("%+v %#v", r, r), logs.String(),
	} {
		assert.NotContains(t, s, value)
		assert.Contains(t, s, mask)
	}
	assert.Equal(t, value, k.SASLPassword.Reveal())
	assert.Empty(t, Secret("").String(), "an unset secret shows as unset")
}

func TestReadSecret(t *testing.T) {
	t.Parallel()
	file := writeFile(t, "password", "from-file\n")
	empty := writeFile(t, "empty", "\n")
	s, err := ReadSecret("--p", "", file)
	require.NoError(t, err)
	assert.Equal(t, "from-file", s.Reveal(), "one trailing newline is removed")
	s, err = ReadSecret("--p", "direct", "")
	require.NoError(t, err)
	assert.Equal(t, "direct", s.Reveal())
	_, err = ReadSecret("--p", "direct", file)
	require.ErrorContains(t, err, "--p and --p-file: set one, not both")
	assert.NotContains(t, err.Error(), "direct")
	_, err = ReadSecret("--p", "", empty)
	require.ErrorContains(t, err, "--p-file "+empty+": empty")
	_, err = ReadSecret("--p", "", file+".missing")
	require.ErrorContains(t, err, "--p-file: open")
}
