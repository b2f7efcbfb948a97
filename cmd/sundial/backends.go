package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gocql/gocql"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/internal/connect"
	"github.com/sundialhq/sundial/jobspec"
	"github.com/sundialhq/sundial/store/cassandra"
)

// This file is the one home of the flags that say how to reach Kafka,
// Cassandra and Redis. Every command that talks to a backend takes these
// flags and builds its clients from kafkaOptions, cassandraConfig and
// redisSettings, so TLS, SASL and passwords reach every client.

// connectTimeout bounds the start-up check of each backend: a wrong password
// or an unknown certificate authority is reported within it instead of being
// retried for ever.
const connectTimeout = 30 * time.Second

// secretFlags hold passwords: config print masks them, and they never have
// a default. Their -file variants are paths and may be shown.
var secretFlags = map[string]bool{"kafka-sasl-password": true, "cassandra-password": true, "redis-password": true, "api-static-token": true, "api-token": true}

// tlsFlags are the TLS flags of one backend ("kafka", "cassandra", "redis").
func tlsFlags(backend, title string) []cli.Flag {
	f := func(suffix string) string { return backend + "-tls" + suffix }
	return []cli.Flag{
		&cli.BoolFlag{Name: f(""), Usage: "connect to " + title + " over TLS (implied by any other --" + backend + "-tls-* flag)", Sources: envVar(f(""))},
		&cli.StringFlag{Name: f("-ca-file"), Usage: "PEM bundle of the authorities that sign " + title + "'s certificates (default: the system's)", Sources: envVar(f("-ca-file"))},
		&cli.StringFlag{Name: f("-cert-file"), Usage: "PEM client certificate, for mutual TLS (with --" + f("-key-file") + ")", Sources: envVar(f("-cert-file"))},
		&cli.StringFlag{Name: f("-key-file"), Usage: "PEM key of --" + f("-cert-file"), Sources: envVar(f("-key-file"))},
		&cli.StringFlag{Name: f("-server-name"), Usage: "name " + title + "'s certificates must carry (default: the host dialled)", Sources: envVar(f("-server-name"))},
	}
}

func readTLS(cmd *cli.Command, backend string) connect.TLS {
	f := func(suffix string) string { return backend + "-tls" + suffix }
	return connect.TLS{
		Enabled: cmd.Bool(f("")), CAFile: cmd.String(f("-ca-file")), CertFile: cmd.String(f("-cert-file")),
		KeyFile: cmd.String(f("-key-file")), ServerName: cmd.String(f("-server-name")),
	}
}

// secret reads a password flag or its -file variant.
func secret(cmd *cli.Command, name string) (connect.Secret, error) {
	s, err := connect.ReadSecret("--"+name, connect.Secret(cmd.String(name)), cmd.String(name+"-file"))
	if err != nil {
		return "", err
	}
	return s, nil
}

// kafkaConnFlags say how to reach Kafka.
func kafkaConnFlags() []cli.Flag {
	return append(append([]cli.Flag{
		&cli.StringSliceFlag{Name: "kafka-brokers", Usage: "Kafka seed brokers, host:port", Sources: envVar("kafka-brokers")},
	}, tlsFlags("kafka", "Kafka")...),
		&cli.StringFlag{Name: "kafka-sasl-mechanism", Usage: "SASL mechanism: " + strings.Join(connect.Mechanisms, ", ") + " (default: none)", Sources: envVar("kafka-sasl-mechanism")},
		&cli.StringFlag{Name: "kafka-sasl-username", Usage: "SASL user (PLAIN, SCRAM)", Sources: envVar("kafka-sasl-username")},
		&cli.StringFlag{Name: "kafka-sasl-password", Usage: "SASL password (PLAIN, SCRAM); prefer the environment or --kafka-sasl-password-file", Sources: envVar("kafka-sasl-password")},
		&cli.StringFlag{Name: "kafka-sasl-password-file", Usage: "file holding the SASL password", Sources: envVar("kafka-sasl-password-file")},
		&cli.StringFlag{Name: "kafka-sasl-token-file", Usage: "file holding the OAUTHBEARER token, re-read at every authentication", Sources: envVar("kafka-sasl-token-file")},
	)
}

// kafkaFlags are the flags of commands that produce to or consume Sundial's
// topics.
func kafkaFlags() []cli.Flag {
	return append(kafkaConnFlags(),
		&cli.StringFlag{Name: "topic-prefix", Usage: "prefix put in front of every topic name", Sources: envVar("topic-prefix")},
	)
}

// kafkaSettings reads kafkaConnFlags.
func kafkaSettings(cmd *cli.Command) (connect.Kafka, error) {
	pass, err := secret(cmd, "kafka-sasl-password")
	k := connect.Kafka{
		Brokers: cmd.StringSlice("kafka-brokers"), TLS: readTLS(cmd, "kafka"),
		SASLMechanism: cmd.String("kafka-sasl-mechanism"), SASLUsername: cmd.String("kafka-sasl-username"),
		SASLPassword: pass, SASLTokenFile: cmd.String("kafka-sasl-token-file"),
	}
	return k, err
}

// kafkaOptions returns the options every Kafka client of the command starts
// from: seed brokers, TLS and SASL. Errors name the flags.
func kafkaOptions(cmd *cli.Command) ([]kgo.Opt, error) {
	if len(cmd.StringSlice("kafka-brokers")) == 0 {
		return nil, errors.New("--kafka-brokers: required (or SUNDIAL_KAFKA_BROKERS)")
	}
	k, err := kafkaSettings(cmd)
	if err != nil {
		// Without the password the SASL settings cannot be judged; the TLS
		// ones still can, and are reported with it.
		_, tlsErr := k.TLS.Config("kafka")
		return nil, errors.Join(err, tlsErr)
	}
	return k.Options()
}

// withKafka returns base followed by more, never writing into base's array:
// the clients of one process share base.
func withKafka(base []kgo.Opt, more ...kgo.Opt) []kgo.Opt {
	return append(slices.Clip(base), more...)
}

// checkKafka connects with opts and fails, within connectTimeout, with the
// cause when Kafka refuses the TLS handshake or the credentials.
func checkKafka(ctx context.Context, opts []kgo.Opt) error {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	return connect.PingKafka(ctx, opts)
}

// guardKafka runs work while checking, beside it, that Kafka accepts the
// connection settings. A client retries a refused connection until its
// deadline and then reports only the timeout; the check instead ends work
// at once with the reason (wrong credentials, unknown authority). Work that
// fails before it reaches Kafka (validation) reports its own error.
func guardKafka(ctx context.Context, opts []kgo.Opt, work func(context.Context) error) error {
	return guardKafkaOnceNeeded(ctx, opts, func(ctx context.Context, need func()) error {
		need()
		return work(ctx)
	})
}

// guardKafkaOnceNeeded is guardKafka for work that decides some things
// without Kafka (a definition that fails validation is reported, never
// produced) and may end without needing it at all. The check starts at
// once, but a refusal ends the work only after the work called need (before
// it first produces): what the work decides alone is reported whatever
// Kafka says, rather than depending on whether the check or the work got
// there first.
func guardKafkaOnceNeeded(ctx context.Context, opts []kgo.Opt, work func(ctx context.Context, need func()) error) error {
	ctx, refuse := context.WithCancelCause(ctx)
	defer refuse(nil)
	checkCtx, stopCheck := context.WithCancel(ctx)
	needed := make(chan struct{})
	var once sync.Once
	need := func() { once.Do(func() { close(needed) }) }
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := checkKafka(checkCtx, opts)
		if err == nil || checkCtx.Err() != nil {
			return
		}
		select {
		case <-needed:
			refuse(err)
		case <-checkCtx.Done():
		}
	}()
	err := work(ctx, need)
	stopCheck()
	<-done
	// A definition or trigger refused by validation was decided before
	// Kafka was asked: that is the answer even when the refusal came
	// meanwhile.
	var invalid *jobspec.ValidationError
	if errors.As(err, &invalid) {
		return err
	}
	if cause := context.Cause(ctx); err != nil && ctx.Err() != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return err
}

// cassandraStoreFlags are the flags of commands that open the Cassandra store.
func cassandraStoreFlags() []cli.Flag {
	return append(append([]cli.Flag{
		&cli.StringSliceFlag{Name: "cassandra-hosts", Usage: "Cassandra contact points, host or host:port", Sources: envVar("cassandra-hosts")},
		&cli.StringFlag{Name: "keyspace", Value: cassandra.DefaultKeyspace, Usage: "Cassandra keyspace of the store", Sources: envVar("keyspace")},
		&cli.StringFlag{Name: "cassandra-datacenter", Usage: "data centre of the keyspace's replicas (NetworkTopologyStrategy when migrate creates it; default: SimpleStrategy); also the default of --cassandra-local-dc", Sources: envVar("cassandra-datacenter")},
		&cli.StringFlag{Name: "cassandra-local-dc", Usage: "data centre whose nodes the driver sends statements to (token-aware within it)", Sources: envVar("cassandra-local-dc")},
	}, tlsFlags("cassandra", "Cassandra")...),
		&cli.StringFlag{Name: "cassandra-username", Usage: "user of Cassandra's PasswordAuthenticator", Sources: envVar("cassandra-username")},
		&cli.StringFlag{Name: "cassandra-password", Usage: "password of --cassandra-username; prefer the environment or --cassandra-password-file", Sources: envVar("cassandra-password")},
		&cli.StringFlag{Name: "cassandra-password-file", Usage: "file holding the Cassandra password", Sources: envVar("cassandra-password-file")},
		&cli.StringFlag{Name: "cassandra-consistency", Value: cassandra.DefaultConsistency, Usage: "consistency of reads and plain writes (e.g. LOCAL_QUORUM, QUORUM, ONE)", Sources: envVar("cassandra-consistency")},
		&cli.StringFlag{Name: "cassandra-serial-consistency", Value: cassandra.DefaultSerialConsistency, Usage: "consistency of lightweight transactions (fencing epochs, watermarks, job rows): LOCAL_SERIAL or SERIAL", Sources: envVar("cassandra-serial-consistency")},
	)
}

// cassandraConfig reads cassandraStoreFlags; errors name the flags.
func cassandraConfig(cmd *cli.Command) (cassandra.Config, error) {
	c := cassandra.Config{
		Hosts: cmd.StringSlice("cassandra-hosts"), Keyspace: cmd.String("keyspace"),
		Datacenter: cmd.String("cassandra-datacenter"), LocalDC: cmd.String("cassandra-local-dc"),
		Username:    cmd.String("cassandra-username"),
		Consistency: cmd.String("cassandra-consistency"), SerialConsistency: cmd.String("cassandra-serial-consistency"),
	}
	var bad []error
	if len(c.Hosts) == 0 {
		bad = append(bad, errors.New("--cassandra-hosts: required (or SUNDIAL_CASSANDRA_HOSTS)"))
	}
	pass, err := secret(cmd, "cassandra-password")
	if err != nil {
		bad = append(bad, err)
	}
	c.Password = pass.Reveal()
	if err == nil && (c.Username == "") != (c.Password == "") {
		bad = append(bad, errors.New("--cassandra-username and --cassandra-password (or its file): set both or neither"))
	}
	if _, err := gocql.ParseConsistencyWrapper(c.Consistency); err != nil {
		bad = append(bad, fmt.Errorf("--cassandra-consistency %q: not a consistency level (e.g. LOCAL_QUORUM, QUORUM, ONE)", c.Consistency))
	}
	c.TLS, err = readTLS(cmd, "cassandra").Config("cassandra")
	if err != nil {
		bad = append(bad, err)
	}
	if err := errors.Join(bad...); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// redisFlags say how to reach Redis.
func redisFlags() []cli.Flag {
	return append(append([]cli.Flag{
		&cli.StringFlag{Name: "redis-addr", Usage: "Redis address, host:port; several, comma-separated, are the seed nodes of a Redis Cluster", Sources: envVar("redis-addr")},
		&cli.BoolFlag{Name: "redis-cluster", Usage: "--redis-addr is a Redis Cluster even with one address (implied by several)", Sources: envVar("redis-cluster")},
		&cli.StringFlag{Name: "redis-sentinel-master", Usage: "name of the master Sentinel watches; the client follows its failovers (with --redis-sentinel-addrs, instead of --redis-addr)", Sources: envVar("redis-sentinel-master")},
		&cli.StringSliceFlag{Name: "redis-sentinel-addrs", Usage: "Sentinel addresses, host:port", Sources: envVar("redis-sentinel-addrs")},
	}, tlsFlags("redis", "Redis")...),
		&cli.StringFlag{Name: "redis-username", Usage: "Redis ACL user (default: the default user)", Sources: envVar("redis-username")},
		&cli.StringFlag{Name: "redis-password", Usage: "password of the ACL user; prefer the environment or --redis-password-file", Sources: envVar("redis-password")},
		&cli.StringFlag{Name: "redis-password-file", Usage: "file holding the Redis password", Sources: envVar("redis-password-file")},
	)
}

// redisSettings reads redisFlags; poolSize bounds the connections per node.
func redisSettings(cmd *cli.Command, poolSize int) (connect.Redis, error) {
	pass, err := secret(cmd, "redis-password")
	r := connect.Redis{
		Cluster:        cmd.Bool("redis-cluster"),
		SentinelMaster: cmd.String("redis-sentinel-master"), SentinelAddrs: cmd.StringSlice("redis-sentinel-addrs"),
		Username: cmd.String("redis-username"), Password: pass, TLS: readTLS(cmd, "redis"), PoolSize: poolSize,
	}
	if a := cmd.String("redis-addr"); a != "" {
		r.Addrs = []string{a}
	}
	return r, err
}

// withStore reports bad together with any error of the Cassandra flags, or
// else opens the store those flags name, runs use on it and closes it: the
// shape of every one-shot command that reads Cassandra.
func withStore(ctx context.Context, cmd *cli.Command, bad []error, use func(*cassandra.Store) error) error {
	cc, err := cassandraConfig(cmd)
	if err != nil {
		bad = append(bad, err)
	}
	if err := errors.Join(bad...); err != nil {
		return err
	}
	st, err := cassandra.Open(ctx, cc)
	if err != nil {
		return fmt.Errorf("cassandra: %w", err)
	}
	defer func() { _ = st.Close() }()
	return use(st)
}
