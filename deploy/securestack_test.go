//go:build secure

package deploy_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// secureStack is the secured local stack (deploy/local/secure.sh) as its
// env command describes it. The tests of this file and of
// securesundial_test.go run only with the secure build tag (make
// test-secure), and a missing stack fails them.
type secureStack struct {
	kafka, cassandra, redis string // client addresses
	tlsDir, secretsDir      string
}

func needSecureStack(t *testing.T) secureStack {
	t.Helper()
	s := secureStack{
		kafka:      os.Getenv("SUNDIAL_SECURE_KAFKA_BROKERS"),
		cassandra:  os.Getenv("SUNDIAL_SECURE_CASSANDRA_HOSTS"),
		redis:      os.Getenv("SUNDIAL_SECURE_REDIS_ADDR"),
		tlsDir:     os.Getenv("SUNDIAL_SECURE_TLS_DIR"),
		secretsDir: os.Getenv("SUNDIAL_SECURE_SECRETS_DIR"),
	}
	if s.kafka == "" || s.cassandra == "" || s.redis == "" || s.tlsDir == "" || s.secretsDir == "" {
		t.Fatal("the secured stack is not described: run deploy/local/secure.sh up, then source <(deploy/local/secure.sh env) (or make test-secure)")
	}
	return s
}

// ca is the stack's CA file; otherCA that of an unrelated CA, which signed
// nothing the servers present.
func (s secureStack) ca() string      { return filepath.Join(s.tlsDir, "ca.pem") }
func (s secureStack) otherCA() string { return filepath.Join(s.tlsDir, "other-ca.pem") }

// secretFile is the password file of one of the stack's users, such as
// kafka-sundial.
func (s secureStack) secretFile(name string) string {
	return filepath.Join(s.secretsDir, name+".password")
}

func (s secureStack) secret(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(s.secretFile(name))
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

// tlsConfigFor trusts caFile and, when certPrefix is given (client or
// other-client), presents that client certificate of the stack's tls folder.
func tlsConfigFor(t *testing.T, caFile string, certPrefix ...string) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pem), "no certificate in %s", caFile)
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	for _, p := range certPrefix {
		dir := filepath.Dir(caFile)
		cert, err := tls.LoadX509KeyPair(filepath.Join(dir, p+".pem"), filepath.Join(dir, p+"-key.pem"))
		require.NoError(t, err)
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg
}

// randomName is a short random suffix for names no other test uses.
func randomName(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// kafkaClient is a client of the secured broker: TLS with caFile when set,
// SCRAM-SHA-512 as user when set. Retries are few, so that a refused login
// comes back as an error instead of a long wait.
func (s secureStack) kafkaClient(t *testing.T, caFile, user, pass string, certPrefix ...string) *kgo.Client {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(s.kafka), kgo.RequestRetries(1), kgo.DialTimeout(10 * time.Second)}
	if caFile != "" {
		opts = append(opts, kgo.DialTLSConfig(tlsConfigFor(t, caFile, certPrefix...)))
	}
	if user != "" {
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
	}
	cl, err := kgo.NewClient(opts...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

func (s secureStack) cassandraCluster(t *testing.T, caFile, user, pass string) *gocql.ClusterConfig {
	t.Helper()
	cluster := gocql.NewCluster(s.cassandra)
	cluster.ProtoVersion = 4
	cluster.ConnectTimeout = 10 * time.Second
	cluster.Timeout = 30 * time.Second
	cluster.NumConns = 1
	cluster.DisableInitialHostLookup = true
	cluster.Logger = log.New(io.Discard, "", 0)
	if caFile != "" {
		cluster.SslOpts = &gocql.SslOptions{Config: tlsConfigFor(t, caFile), EnableHostVerification: true}
	}
	if user != "" {
		cluster.Authenticator = gocql.PasswordAuthenticator{Username: user, Password: pass}
	}
	return cluster
}

func (s secureStack) redisClient(t *testing.T, caFile, user, pass string, certPrefix ...string) *redis.Client {
	t.Helper()
	opts := &redis.Options{Addr: s.redis, Username: user, Password: pass, MaxRetries: -1, DialTimeout: 10 * time.Second, Protocol: 2}
	if caFile != "" {
		opts.TLSConfig = tlsConfigFor(t, caFile, certPrefix...)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// TestSecureStackKafka checks the broker of the secured stack with a raw
// client: the user sundial works on its topics over TLS, and a wrong
// password, the user other (no ACL), an unknown CA and plaintext each fail.
func TestSecureStackKafka(t *testing.T) {
	s := needSecureStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	topic := "sundial.stack-" + randomName(t) + ".probe"

	t.Run("sundial produces and consumes on its topics", func(t *testing.T) {
		cl := s.kafkaClient(t, s.ca(), "sundial", s.secret(t, "kafka-sundial"))
		adm := kadm.NewClient(cl)
		resp, err := adm.CreateTopic(ctx, 1, 1, nil, topic)
		require.NoError(t, err)
		require.NoError(t, resp.Err, "create %s", topic)
		t.Cleanup(func() {
			// The test's context has ended by the time cleanups run.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if _, err := adm.DeleteTopic(ctx, topic); err != nil {
				t.Logf("cleanup: delete topic %s: %v", topic, err)
			}
		})
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("hello")}).FirstErr())

		consumer := s.kafkaClient(t, s.ca(), "sundial", s.secret(t, "kafka-sundial"))
		consumer.AddConsumeTopics(topic)
		for {
			fetches := consumer.PollFetches(ctx)
			require.NoError(t, ctx.Err(), "no record came back from %s", topic)
			for _, fe := range fetches.Errors() {
				require.NoError(t, fe.Err, "fetch %s", fe.Topic)
			}
			if recs := fetches.Records(); len(recs) > 0 {
				require.Equal(t, "hello", string(recs[0].Value))
				break
			}
		}
	})

	// A client certificate is optional (ssl.client.auth=requested): the
	// stack's is accepted. One the truststore does not verify is ignored,
	// not refused (Java's "want" client authentication), so it has no case
	// here; SCRAM is what authenticates.
	t.Run("a client certificate of the stack's CA is accepted", func(t *testing.T) {
		_, err := kadm.NewClient(s.kafkaClient(t, s.ca(), "sundial", s.secret(t, "kafka-sundial"), "client")).BrokerMetadata(ctx)
		require.NoError(t, err)
	})

	cases := []struct {
		name, ca, user, pass string
		cert                 []string // client certificate to present
		want                 []string // substrings of the error, any of them
	}{
		{"wrong SCRAM password", s.ca(), "sundial", "not-" + s.secret(t, "kafka-sundial"), nil, []string{"SASL_AUTHENTICATION_FAILED"}},
		{"unknown CA", s.otherCA(), "sundial", s.secret(t, "kafka-sundial"), nil, []string{"certificate signed by unknown authority"}},
		{"plaintext", "", "sundial", s.secret(t, "kafka-sundial"), nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name+" is refused", func(t *testing.T) {
			_, err := kadm.NewClient(s.kafkaClient(t, c.ca, c.user, c.pass, c.cert...)).BrokerMetadata(ctx)
			require.Error(t, err)
			t.Logf("error: %v", err)
			requireContainsAny(t, err.Error(), c.want)
		})
	}

	t.Run("other without ACLs is refused the topics", func(t *testing.T) {
		cl := s.kafkaClient(t, s.ca(), "other", s.secret(t, "kafka-other"))
		resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "sundial.stack-"+randomName(t)+".other")
		if err == nil {
			err = resp.Err
		}
		require.Error(t, err)
		t.Logf("create topic: %v", err)
		requireContainsAny(t, err.Error(), []string{"TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED"})
		err = cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr()
		require.Error(t, err)
		t.Logf("produce: %v", err)
		requireContainsAny(t, err.Error(), []string{"TOPIC_AUTHORIZATION_FAILED"})
	})
}

// TestSecureStackCassandra checks the CQL port of the secured stack: the
// role sundial creates and drops a keyspace over TLS, and a wrong password,
// no login, an unknown CA and plaintext each fail.
func TestSecureStackCassandra(t *testing.T) {
	s := needSecureStack(t)
	keyspace := "sec_stack_" + randomName(t)

	t.Run("sundial uses a keyspace of its own", func(t *testing.T) {
		cluster := s.cassandraCluster(t, s.ca(), "sundial", s.secret(t, "cassandra-sundial"))
		cluster.MaxWaitSchemaAgreement = time.Minute
		session, err := cluster.CreateSession()
		require.NoError(t, err)
		defer session.Close()
		require.NoError(t, session.Query("CREATE KEYSPACE "+keyspace+" WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}").Exec())
		defer func() {
			if err := session.Query("DROP KEYSPACE IF EXISTS " + keyspace).Exec(); err != nil {
				t.Logf("cleanup: drop keyspace %s: %v", keyspace, err)
			}
		}()
		require.NoError(t, session.Query("CREATE TABLE "+keyspace+".t (k text PRIMARY KEY, v text)").Exec())
		require.NoError(t, session.Query("INSERT INTO "+keyspace+".t (k, v) VALUES ('a', 'b')").Exec())
		var v string
		require.NoError(t, session.Query("SELECT v FROM "+keyspace+".t WHERE k = 'a'").Scan(&v))
		require.Equal(t, "b", v)
	})

	cases := []struct {
		name, ca, user, pass string
		want                 []string
	}{
		{"wrong password", s.ca(), "sundial", "not-" + s.secret(t, "cassandra-sundial"), []string{"password are incorrect"}},
		{"the default superuser password", s.ca(), "cassandra", "cassandra", []string{"password are incorrect"}},
		{"no login", s.ca(), "", "", []string{"authentication required", "Authenticator"}},
		{"unknown CA", s.otherCA(), "sundial", s.secret(t, "cassandra-sundial"), []string{"certificate signed by unknown authority"}},
		{"plaintext", "", "sundial", s.secret(t, "cassandra-sundial"), nil},
	}
	for _, c := range cases {
		t.Run(c.name+" is refused", func(t *testing.T) {
			session, err := s.cassandraCluster(t, c.ca, c.user, c.pass).CreateSession()
			if err == nil {
				session.Close()
			}
			require.Error(t, err)
			t.Logf("error: %v", err)
			requireContainsAny(t, err.Error(), c.want)
		})
	}
}

// TestSecureStackRedis checks the Redis of the secured stack: the ACL user
// sundial works over TLS, and a wrong password, the default user, an
// unknown CA and plaintext each fail.
func TestSecureStackRedis(t *testing.T) {
	s := needSecureStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	t.Run("sundial reads and writes", func(t *testing.T) {
		rdb := s.redisClient(t, s.ca(), "sundial", s.secret(t, "redis-sundial"))
		key := "sundial:stack-" + randomName(t)
		require.NoError(t, rdb.Set(ctx, key, "v", time.Minute).Err())
		defer rdb.Del(context.WithoutCancel(ctx), key)
		got, err := rdb.Get(ctx, key).Result()
		require.NoError(t, err)
		require.Equal(t, "v", got)
	})

	t.Run("a client certificate of the stack's CA is accepted", func(t *testing.T) {
		require.NoError(t, s.redisClient(t, s.ca(), "sundial", s.secret(t, "redis-sundial"), "client").Ping(ctx).Err())
	})

	cases := []struct {
		name, ca, user, pass string
		cert                 []string
		want                 []string
	}{
		{"wrong password", s.ca(), "sundial", "not-" + s.secret(t, "redis-sundial"), nil, []string{"WRONGPASS"}},
		{"the default user", s.ca(), "", "", nil, []string{"NOAUTH"}},
		{"unknown CA", s.otherCA(), "sundial", s.secret(t, "redis-sundial"), nil, []string{"certificate signed by unknown authority"}},
		{"a client certificate of an unknown CA", s.ca(), "sundial", s.secret(t, "redis-sundial"), []string{"other-client"}, nil},
		{"plaintext", "", "sundial", s.secret(t, "redis-sundial"), nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name+" is refused", func(t *testing.T) {
			err := s.redisClient(t, c.ca, c.user, c.pass, c.cert...).Ping(ctx).Err()
			require.Error(t, err)
			t.Logf("error: %v", err)
			requireContainsAny(t, err.Error(), c.want)
		})
	}
}

// requireContainsAny fails unless got contains one of want; an empty want
// accepts any error (plaintext against a TLS port fails in ways that depend
// on timing: a reset, an EOF or a timeout).
func requireContainsAny(t *testing.T, got string, want []string) {
	t.Helper()
	if len(want) == 0 {
		return
	}
	for _, w := range want {
		if strings.Contains(got, w) {
			return
		}
	}
	require.Fail(t, fmt.Sprintf("error %q contains none of %q", got, want))
}
