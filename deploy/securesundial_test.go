//go:build secure

package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
)

// failBound is how long a command may take to fail on a refused login, an
// unknown CA or a missing ACL: such failures are final, and a command that
// retries them until its own timeout (set far longer below) fails the test.
const failBound = 90 * time.Second

// TestSecureStackRunsSundial runs the built sundial command against the
// secured stack with flags only (no SUNDIAL_* variable reaches it): migrate,
// then a registry, a dispatcher and a runner; a job applied with `jobs
// apply` must fire, as `runs list` shows. Then each wrong setting (a wrong
// password for each backend, an unknown CA for each, the Kafka user without
// ACLs, a Redis client certificate of an unknown CA) must make a command
// fail within failBound, naming the backend and the cause. Last, no output
// of any of these processes, nor --help with the passwords in the
// environment, shows a password.
func TestSecureStackRunsSundial(t *testing.T) {
	s := needSecureStack(t)
	bin := secureBinary(t)
	dir := os.Getenv("SUNDIAL_SECURE_OUT")
	if dir == "" {
		dir = t.TempDir()
	} else {
		require.NoError(t, os.MkdirAll(dir, 0o755))
	}
	id := "sec" + randomName(t)
	// The ACLs of the user sundial cover topics sundial.* and groups
	// sundial*: the test's names stay inside them.
	prefix := "sundial." + id + "."
	keyspace := "sec_" + id
	redisPrefix := "sundial:" + id + ":"
	group := func(role string) string { return "sundial-" + id + "-" + role }
	t.Logf("topic prefix %s, keyspace %s, Redis key prefix %s, logs in %s", prefix, keyspace, redisPrefix, dir)
	t.Cleanup(func() { s.cleanUp(t, prefix, keyspace, redisPrefix, id) })

	f := secureFlags{s: s, ca: s.ca()}
	kafka, cassandra := f.kafka(), f.cassandra()
	names := []string{"--topic-prefix", prefix}
	ks := []string{"--keyspace", keyspace}
	var outputs []string // every file holding a process's output
	env := cleanEnv()

	// run runs a one-shot command and returns its combined output and
	// error; its output is kept for the secrets check.
	run := func(name string, timeout time.Duration, args ...string) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		path := filepath.Join(dir, name+".out")
		require.NoError(t, os.WriteFile(path, out, 0o644))
		outputs = append(outputs, path)
		if ctx.Err() != nil {
			err = fmt.Errorf("%s did not finish within %s: %w", name, timeout, ctx.Err())
		}
		return string(out), err
	}
	must := func(name string, args ...string) string {
		t.Helper()
		out, err := run(name, 5*time.Minute, args...)
		require.NoError(t, err, "sundial %s:\n%s", strings.Join(args, " "), out)
		t.Logf("sundial %s: %s", args[0], lastLine([]byte(out)))
		return out
	}

	// The failing migrations below must reach the backend under test with
	// the same shard count (Cassandra is checked first).
	migrate := []string{"migrate", "--shards", "8", "--timeout", "10m"}
	must("migrate", cat(migrate, kafka, cassandra, names, ks)...)
	// The job's team and its topic, as the README's first steps make them:
	// the registry reads team topics only.
	must("teams-create", cat([]string{"teams", "create", "security"}, kafka, cassandra, names, ks)...)

	process := cat([]string{"--metrics-addr", "127.0.0.1:0", "--log-format", "json"}, kafka, cassandra, names, ks)
	registry := startSundial(t, bin, env, dir, "registry", cat([]string{"registry", "--group-id", group("registry"), "--trigger-group-id", group("triggers")}, process)...)
	dispatcher := startSundial(t, bin, env, dir, "dispatcher", cat([]string{"dispatcher", "--group-id", group("dispatchers")}, process)...)
	// The runner also presents the stack's client certificate to Kafka and
	// Redis, which verify it (mutual TLS) besides the password login.
	mtls := secureFlags{s: s, ca: s.ca(), clientCert: "client"}
	runnerArgs := cat([]string{"runner", "--group-id", group("runners"), "--redis-key-prefix", redisPrefix, "--shutdown-timeout", "5s",
		"--metrics-addr", "127.0.0.1:0", "--log-format", "json"}, mtls.kafka(), cassandra, names, ks, mtls.redis())
	runner := startSundial(t, bin, env, dir, "runner", runnerArgs...)
	// Run history is stored by its own process, as in production.
	history := startSundial(t, bin, env, dir, "history", cat([]string{"history", "--group-id", group("history")}, process)...)
	procs := []*sundialProcess{registry, dispatcher, runner, history}
	for _, p := range procs {
		outputs = append(outputs, p.logPath)
		p.waitReady(t, 3*time.Minute)
	}

	job := id + "-every-2s"
	spec, err := json.Marshal([]map[string]any{{
		"id": job, "ownerTeam": "security", "description": "fires on the secured stack",
		"schedule": map[string]any{"interval": map[string]any{"every": "2s"}, "timeZone": "UTC"},
		"target":   map[string]any{"handler": map[string]any{"name": "noop"}},
	}})
	require.NoError(t, err)
	jobsFile := filepath.Join(dir, "jobs.json")
	require.NoError(t, os.WriteFile(jobsFile, spec, 0o644))
	must("jobs-apply", cat([]string{"jobs", "apply", "-f", jobsFile, "--timeout", "2m"}, kafka, names)...)

	// The history process stores each run's events; wait until a run of
	// the job is there (the wait is bounded by the test's own timeout).
	fired := regexp.MustCompile(`job \S+: ([1-9][0-9]*) run\(s\)`)
	for {
		out, err := run("runs-list", 2*time.Minute, cat([]string{"runs", "list", "--job", job}, cassandra, ks)...)
		require.NoError(t, err, "runs list:\n%s", out)
		if m := fired.FindStringSubmatch(out); m != nil {
			t.Logf("the job fired: %s", strings.TrimSpace(out))
			break
		}
		for _, p := range procs {
			require.NoError(t, p.exitErr())
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("the job never fired; last runs list:\n%s", out)
		case <-time.After(2 * time.Second):
		}
	}
	for _, p := range procs {
		require.NoError(t, p.exitErr(), "%s exited", p.name)
	}

	// Each refusal: a command with one wrong setting, the backend it must
	// name and the cause it must give.
	wrong := "wrong-" + randomName(t)
	other := secureFlags{s: s, ca: s.ca(), kafkaUser: "other", kafkaPasswordFile: s.secretFile("kafka-other")}
	unknown := secureFlags{s: s, ca: s.otherCA()}
	cases := []struct {
		name    string
		args    []string
		backend string
		cause   *regexp.Regexp
	}{
		{"kafka wrong SCRAM password", cat(migrate,
			secureFlags{s: s, ca: s.ca(), kafkaPassword: wrong}.kafka(), cassandra, names, ks),
			"kafka", regexp.MustCompile(`(?i)SASL_AUTHENTICATION_FAILED|authentication failed|invalid credentials`)},
		{"kafka user without ACLs", cat(migrate, other.kafka(), cassandra, names, ks),
			"kafka", regexp.MustCompile(`(?i)AUTHORIZATION_FAILED|not authorized`)},
		{"kafka unknown CA", cat(migrate, unknown.kafka(), cassandra, names, ks),
			"kafka", regexp.MustCompile(`(?i)unknown authority`)},
		{"cassandra wrong password", cat(migrate,
			kafka, secureFlags{s: s, ca: s.ca(), cassandraPassword: wrong}.cassandra(), names, ks),
			"cassandra", regexp.MustCompile(`(?i)password are incorrect|authentication|bad credentials`)},
		{"cassandra unknown CA", cat(migrate, kafka, unknown.cassandra(), names, ks),
			"cassandra", regexp.MustCompile(`(?i)unknown authority`)},
		{"redis wrong password", cat([]string{"runner", "--group-id", group("runners-bad"), "--redis-key-prefix", redisPrefix},
			process, secureFlags{s: s, ca: s.ca(), redisPassword: wrong}.redis()),
			"redis", regexp.MustCompile(`WRONGPASS|invalid username-password`)},
		{"redis unknown CA", cat([]string{"runner", "--group-id", group("runners-bad"), "--redis-key-prefix", redisPrefix}, process, unknown.redis()),
			"redis", regexp.MustCompile(`(?i)unknown authority`)},
		{"redis client certificate of an unknown CA", cat([]string{"runner", "--group-id", group("runners-bad"), "--redis-key-prefix", redisPrefix},
			process, secureFlags{s: s, ca: s.ca(), clientCert: "other-client"}.redis()),
			"redis", regexp.MustCompile(`(?i)unknown certificate authority|bad certificate`)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			out, err := run(strings.ReplaceAll(c.name, " ", "-"), failBound, c.args...)
			took := time.Since(start)
			require.Error(t, err, "sundial %s succeeded:\n%s", c.args[0], out)
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "sundial %s did not fail by itself within %s:\n%s", c.args[0], failBound, tail(out, 20))
			msg := errorLine(out)
			t.Logf("failed after %s: %s", took.Round(100*time.Millisecond), msg)
			require.Regexp(t, regexp.MustCompile(`(?i)\b`+c.backend+`\b`), msg, "the error does not name %s", c.backend)
			require.Regexp(t, c.cause, msg, "the error does not give the cause")
		})
	}

	// --help with the passwords in the environment must not print them as
	// defaults.
	for _, command := range []string{"migrate", "runner"} {
		cmd := exec.CommandContext(t.Context(), bin, command, "--help")
		cmd.Env = append(cleanEnv(),
			"SUNDIAL_KAFKA_SASL_PASSWORD="+s.secret(t, "kafka-sundial"),
			"SUNDIAL_CASSANDRA_PASSWORD="+s.secret(t, "cassandra-sundial"),
			"SUNDIAL_REDIS_PASSWORD="+s.secret(t, "redis-sundial"))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "sundial %s --help:\n%s", command, out)
		path := filepath.Join(dir, command+"-help.out")
		require.NoError(t, os.WriteFile(path, out, 0o644))
		outputs = append(outputs, path)
	}

	// Stop the processes first, so that their shutdown lines are checked too.
	for _, p := range procs {
		p.stop(t)
	}
	secrets := map[string]string{"the wrong password": wrong}
	for _, name := range []string{"kafka-sundial", "kafka-other", "kafka-admin", "cassandra-sundial", "cassandra-admin", "redis-sundial"} {
		secrets[name+" password"] = s.secret(t, name)
	}
	for _, path := range outputs {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		for what, value := range secrets {
			require.NotContains(t, string(b), value, "%s shows %s", path, what)
		}
	}
	t.Logf("no password in the %d outputs", len(outputs))
}

// secureFlags builds the sundial flags that reach the secured stack. Each
// backend's user is sundial with its password file unless a field says
// otherwise.
type secureFlags struct {
	s  secureStack
	ca string

	kafkaUser, kafkaPasswordFile string
	kafkaPassword                string // given on the command line instead of a file
	cassandraPassword            string
	redisPassword                string
	clientCert                   string // client certificate to present to Kafka and Redis: client, other-client or none
}

func (f secureFlags) cert(backend string) []string {
	if f.clientCert == "" {
		return nil
	}
	return []string{"--" + backend + "-tls-cert-file", filepath.Join(f.s.tlsDir, f.clientCert+".pem"),
		"--" + backend + "-tls-key-file", filepath.Join(f.s.tlsDir, f.clientCert+"-key.pem")}
}

func (f secureFlags) kafka() []string {
	args := []string{"--kafka-brokers", f.s.kafka, "--kafka-tls", "--kafka-tls-ca-file", f.ca,
		"--kafka-sasl-mechanism", "SCRAM-SHA-512", "--kafka-sasl-username", cmpOr(f.kafkaUser, "sundial")}
	args = append(args, f.cert("kafka")...)
	if f.kafkaPassword != "" {
		return append(args, "--kafka-sasl-password", f.kafkaPassword)
	}
	return append(args, "--kafka-sasl-password-file", cmpOr(f.kafkaPasswordFile, f.s.secretFile("kafka-sundial")))
}

func (f secureFlags) cassandra() []string {
	args := []string{"--cassandra-hosts", f.s.cassandra, "--cassandra-tls", "--cassandra-tls-ca-file", f.ca,
		"--cassandra-username", "sundial"}
	if f.cassandraPassword != "" {
		return append(args, "--cassandra-password", f.cassandraPassword)
	}
	return append(args, "--cassandra-password-file", f.s.secretFile("cassandra-sundial"))
}

func (f secureFlags) redis() []string {
	args := []string{"--redis-addr", f.s.redis, "--redis-tls", "--redis-tls-ca-file", f.ca, "--redis-username", "sundial"}
	args = append(args, f.cert("redis")...)
	if f.redisPassword != "" {
		return append(args, "--redis-password", f.redisPassword)
	}
	return append(args, "--redis-password-file", f.s.secretFile("redis-sundial"))
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func cat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// cleanEnv is the test's environment without any SUNDIAL_ variable, so
// that the commands see flags only (and not the plain stack's addresses).
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SUNDIAL_") {
			env = append(env, kv)
		}
	}
	return env
}

// secureBinary is SUNDIAL_SECURE_BINARY when set, else the command built
// from this tree.
func secureBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("SUNDIAL_SECURE_BINARY"); bin != "" {
		abs, err := filepath.Abs(bin)
		require.NoError(t, err)
		return abs
	}
	return sundialBinary(t)
}

// errorLine is the error sundial printed last ("sundial: ..."), or the last
// line of its output when it printed none.
func errorLine(out string) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "sundial: ") {
			return lines[i]
		}
	}
	return lines[len(lines)-1]
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// cleanUp deletes what the test made on the secured stack, as the user
// sundial: the topics and groups, the keyspace and the Redis keys.
func (s secureStack) cleanUp(t *testing.T, prefix, keyspace, redisPrefix, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := kadm.NewClient(s.kafkaClient(t, s.ca(), "sundial", s.secret(t, "kafka-sundial")))
	if topics, err := adm.ListTopics(ctx); err != nil {
		t.Logf("cleanup: list topics: %v", err)
	} else {
		var mine []string
		for _, name := range topics.Names() {
			if strings.HasPrefix(name, prefix) {
				mine = append(mine, name)
			}
		}
		if len(mine) > 0 {
			if _, err := adm.DeleteTopics(ctx, mine...); err != nil {
				t.Logf("cleanup: delete topics: %v", err)
			}
		}
	}
	if groups, err := adm.ListGroups(ctx); err == nil {
		var mine []string
		for _, g := range groups.Groups() {
			if strings.HasPrefix(g, "sundial-"+id+"-") {
				mine = append(mine, g)
			}
		}
		if len(mine) > 0 {
			if _, err := adm.DeleteGroups(ctx, mine...); err != nil {
				t.Logf("cleanup: delete groups: %v", err)
			}
		}
	}
	cluster := s.cassandraCluster(t, s.ca(), "sundial", s.secret(t, "cassandra-sundial"))
	cluster.MaxWaitSchemaAgreement = time.Minute
	if session, err := cluster.CreateSession(); err != nil {
		t.Logf("cleanup: cassandra: %v", err)
	} else {
		if err := session.Query("DROP KEYSPACE IF EXISTS " + keyspace).WithContext(ctx).Exec(); err != nil {
			t.Logf("cleanup: drop keyspace %s: %v", keyspace, err)
		}
		session.Close()
	}
	rdb := s.redisClient(t, s.ca(), "sundial", s.secret(t, "redis-sundial"))
	iter := rdb.Scan(ctx, 0, redisPrefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Logf("cleanup: redis keys %s*: %v", redisPrefix, err)
	}
}
