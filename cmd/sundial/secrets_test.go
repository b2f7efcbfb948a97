package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/internal/testenv"
)

// watchedBuffer is a log sink that closes a channel when a line with msg is
// written.
type watchedBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	msg  string
	seen chan struct{}
	once sync.Once
}

func (w *watchedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.msg) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}

func (w *watchedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestSecretsNeverPrinted runs migrate and a runner against a Kafka that
// wants SCRAM, a Redis that wants an ACL user, and Cassandra with a
// password, each secret from another source (environment, file, config
// file), with debug logs; then greps the logs, /metrics, config print and
// every command's --help for the secrets, and the output of the teams and
// tokens commands for an API token's secret and hash. Not parallel: it sets the
// environment.
func TestSecretsNeverPrinted(t *testing.T) {
	const (
		kafkaSecret = "kafka-secret-4d1c"
		redisSecret = "redis-secret-9a7e"
		cassSecret  = "cassandra-secret-27b0"
	)
	secrets := []string{kafkaSecret, redisSecret, cassSecret}
	cass := testenv.NeedCassandra(t)

	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "sundial", kafkaSecret))
	require.NoError(t, err)
	t.Cleanup(kc.Close)
	rs := miniredis.RunT(t)
	rs.RequireUserAuth("sundial", redisSecret)

	dir := t.TempDir()
	redisPasswordFile := filepath.Join(dir, "redis-password")
	require.NoError(t, os.WriteFile(redisPasswordFile, []byte(redisSecret+"\n"), 0o600))
	// The stack's Cassandra asks for no password; the driver then sends
	// none, but the flag is read, validated and carried like any other.
	config := filepath.Join(dir, "sundial.yaml")
	require.NoError(t, os.WriteFile(config, fmt.Appendf(nil, `
kafka-brokers: [%s]
kafka-sasl-mechanism: SCRAM-SHA-512
kafka-sasl-username: sundial
cassandra-hosts: [%s]
keyspace: %s
cassandra-username: sundial
cassandra-password: %s
redis-addr: %s
redis-username: sundial
redis-password-file: %s
`, strings.Join(kc.ListenAddrs(), ","), strings.Join(cass.Hosts, ","), cass.Keyspace, cassSecret, rs.Addr(), redisPasswordFile), 0o600))
	t.Setenv(envName("config"), config)
	t.Setenv(envName("kafka-sasl-password"), kafkaSecret)
	// The stack's exported addresses would win over the file.
	for _, k := range []string{"kafka-brokers", "cassandra-hosts", "redis-addr", "keyspace", "topic-prefix"} {
		t.Setenv(envName(k), "")
		require.NoError(t, os.Unsetenv(envName(k)))
	}
	noSecret := func(what, s string) {
		t.Helper()
		for _, secret := range secrets {
			assert.NotContains(t, s, secret, "%s shows a secret", what)
		}
	}

	code, out, errOut := runCLI(t, "migrate", "--shards", "4", "--topic-replication-factor", "1")
	require.Equal(t, 0, code, "migrate: %s", errOut)
	noSecret("migrate", out+errOut)

	// An API token is a secret too: tokens create prints it once, on
	// standard output, and nothing shows it again, nor its hash.
	code, out, errOut = runCLI(t, "teams", "create", "secrets")
	require.Equal(t, 0, code, "teams create: %s", errOut)
	noSecret("teams create", out+errOut)
	code, out, errOut = runCLI(t, "tokens", "create", "--team", "secrets", "--role", "admin")
	require.Equal(t, 0, code, "tokens create: %s", errOut)
	cred, err := auth.ParseBearer(strings.TrimSpace(out))
	require.NoError(t, err, "tokens create prints the bearer")
	noSecret("tokens create's report", errOut)
	hash := auth.HashSecret(cred.Secret)
	secrets = append(secrets, cred.Secret, hex.EncodeToString(hash), base64.StdEncoding.EncodeToString(hash))
	for _, args := range [][]string{{"tokens", "list"}, {"tokens", "list", "--team", "secrets"}, {"teams", "list"}, {"tokens", "revoke", cred.ID}} {
		code, out, errOut = runCLI(t, args...)
		require.Equal(t, 0, code, "%v: %s", args, errOut)
		noSecret(strings.Join(args, " "), out+errOut)
	}

	// A wrong Kafka password fails at start-up, naming Kafka.
	code, _, errOut = runCLI(t, "runner", "--kafka-sasl-password", "not-the-password")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "sundial: kafka: ")
	noSecret("a refused runner", errOut)

	logs := &watchedBuffer{msg: `"msg":"started"`, seen: make(chan struct{})}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan int, 1)
	var stdout bytes.Buffer
	go func() {
		done <- run(ctx, []string{"sundial", "runner", "--log-level", "debug", "--log-format", "json", "--metrics-addr", "127.0.0.1:0"}, &stdout, logs)
	}()
	select {
	case <-logs.seen:
	case code := <-done:
		t.Fatalf("the runner ended with %d before it started: %s", code, logs.String())
	}
	var metrics string
	for line := range strings.SplitSeq(logs.String(), "\n") {
		var rec struct{ Msg, Addr string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "serving /metrics, /healthz and /readyz" {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+rec.Addr+"/metrics", nil)
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			metrics = string(body)
		}
	}
	require.NotEmpty(t, metrics, "the runner served /metrics: %s", logs.String())
	cancel()
	require.Equal(t, 0, <-done, "the runner stops cleanly: %s", logs.String())
	t.Logf("%d bytes of logs, %d of metrics", len(logs.String()), len(metrics))
	noSecret("the runner's logs", stdout.String()+logs.String())
	noSecret("the runner's /metrics", metrics)

	code, out, errOut = runCLI(t, "config", "print", "runner")
	require.Equal(t, 0, code, errOut)
	noSecret("config print", out+errOut)

	var paths [][]string
	walkPaths(newApp(&bytes.Buffer{}, &bytes.Buffer{}), func(_ *cli.Command, path string) {
		paths = append(paths, strings.Fields(path))
	})
	require.Greater(t, len(paths), 20, "every command's help")
	for _, p := range paths {
		code, out, errOut := runCLI(t, append(p, "--help")...)
		require.Equal(t, 0, code, "%v --help: %s", p, errOut)
		noSecret(fmt.Sprintf("sundial %v --help", p), out+errOut)
	}
}
