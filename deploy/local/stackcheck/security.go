package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gocql/gocql"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/internal/connect"
)

// security is how the probes reach a secured stack (deploy/local/secure.sh):
// TLS verified against one CA, and a user per backend. The zero value is the
// plain stack: no TLS, no authentication.
type security struct {
	caFile string // PEM CA the servers' certificates chain to; "": plaintext

	kafkaUser, kafkaPasswordFile         string // SCRAM-SHA-512
	cassandraUser, cassandraPasswordFile string // PasswordAuthenticator
	redisUser, redisPasswordFile         string // ACL user
}

// validate reports every incomplete setting: a user without a password file
// or the reverse.
func (s security) validate() []error {
	var problems []error
	pair := func(backend, user, file string) {
		if (user == "") != (file == "") {
			problems = append(problems, fmt.Errorf("-%s-user and -%s-password-file: give both or neither", backend, backend))
		}
	}
	pair("kafka", s.kafkaUser, s.kafkaPasswordFile)
	pair("cassandra", s.cassandraUser, s.cassandraPasswordFile)
	pair("redis", s.redisUser, s.redisPasswordFile)
	return problems
}

// tlsConfig is the client TLS configuration, or nil for plaintext. The CA
// file is read on every call so that a probe started before the stack wrote
// its certificates sees them once they exist.
func (s security) tlsConfig() (*tls.Config, error) {
	if s.caFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(s.caFile)
	if err != nil {
		return nil, fmt.Errorf("tls CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tls CA %s: no PEM certificate in it", s.caFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// readSecret returns the first line of a password file; the file, not the
// command line, holds secrets so that they never show in ps.
func readSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("password file: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if line = strings.TrimRight(line, "\r"); line == "" {
		return "", fmt.Errorf("password file %s: empty", path)
	}
	return line, nil
}

// kafka is how to reach the broker at addr as s says, in the settings every
// sundial command uses (connect.Kafka); its Options are the client's.
func (s security) kafka(addr string) (connect.Kafka, error) {
	k := connect.Kafka{Brokers: []string{addr}, TLS: connect.TLS{CAFile: s.caFile}}
	if s.kafkaUser != "" {
		pass, err := readSecret(s.kafkaPasswordFile)
		if err != nil {
			return k, fmt.Errorf("kafka %w", err)
		}
		k.SASLMechanism, k.SASLUsername, k.SASLPassword = connect.MechanismScramSHA512, s.kafkaUser, connect.Secret(pass)
	}
	return k, nil
}

// kafkaOpts are the client options that reach the broker at addr as s
// says.
func (s security) kafkaOpts(addr string) ([]kgo.Opt, error) {
	k, err := s.kafka(addr)
	if err != nil {
		return nil, err
	}
	return k.Options()
}

// cassandra applies s to a cluster configuration.
func (s security) cassandra(cluster *gocql.ClusterConfig) error {
	cfg, err := s.tlsConfig()
	if err != nil {
		return err
	}
	if cfg != nil {
		cluster.SslOpts = &gocql.SslOptions{Config: cfg, EnableHostVerification: true}
	}
	if s.cassandraUser != "" {
		pass, err := readSecret(s.cassandraPasswordFile)
		if err != nil {
			return fmt.Errorf("cassandra %w", err)
		}
		cluster.Authenticator = gocql.PasswordAuthenticator{Username: s.cassandraUser, Password: pass}
	}
	return nil
}

// redis returns the TLS configuration, user and password for go-redis.
func (s security) redis() (cfg *tls.Config, user, pass string, err error) {
	if cfg, err = s.tlsConfig(); err != nil {
		return nil, "", "", err
	}
	if s.redisUser != "" {
		if pass, err = readSecret(s.redisPasswordFile); err != nil {
			return nil, "", "", fmt.Errorf("redis %w", err)
		}
	}
	return cfg, s.redisUser, pass, nil
}

// kafkaGrant gives user, on a secured broker with the StandardAuthorizer,
// everything on the topics, groups and transactional ids whose names start
// with prefix, and the cluster operations a producer and an admin client
// need; nothing else. Creating an ACL that exists is a no-op, so a restart
// grants again harmlessly.
func kafkaGrant(ctx context.Context, addr string, sec security, user, prefix string) (string, error) {
	opts, err := sec.kafkaOpts(addr)
	if err != nil {
		return "", err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return "", fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	principal := "User:" + user
	named := kadm.NewACLs().Allow(principal).AllowHosts().
		Topics(prefix + ".").Groups(prefix).TransactionalIDs(prefix).
		ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpAll)
	cluster := kadm.NewACLs().Allow(principal).AllowHosts().Clusters().
		Operations(kadm.OpDescribe, kadm.OpIdempotentWrite, kadm.OpDescribeConfigs)
	for _, b := range []*kadm.ACLBuilder{named, cluster} {
		res, err := adm.CreateACLs(ctx, b)
		if err != nil {
			return "", fmt.Errorf("create ACLs for %s: %w", principal, err)
		}
		for _, r := range res {
			if r.Err != nil {
				return "", fmt.Errorf("create ACL %s %s %s for %s: %w", r.Operation, r.Type, r.Name, principal, r.Err)
			}
		}
	}
	return fmt.Sprintf("%s may use topics %s.*, groups and transactional ids %s*", principal, prefix, prefix), nil
}

// kafkaTeams creates a SCRAM-SHA-512 user per team, with the password in
// dir/kafka-<team>.password, allowed to write (and describe) its own team
// topic sundial.jobs.<team> and to read sundial.jobs.status, where the
// registry answers: the users of an installation where Kafka, not the
// producer, decides which team a definition comes from. Nothing else is
// allowed them; in particular sundial.audit is written by the service
// principal alone. Idempotent: the password is set again and existing ACLs
// are kept.
func kafkaTeams(ctx context.Context, addr string, sec security, teams []string, dir string) (string, error) {
	opts, err := sec.kafkaOpts(addr)
	if err != nil {
		return "", err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return "", fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, team := range teams {
		pass, err := readSecret(filepath.Join(dir, "kafka-"+team+".password"))
		if err != nil {
			return "", fmt.Errorf("team %s: %w", team, err)
		}
		res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: team, Mechanism: kadm.ScramSha512, Iterations: 8192, Password: pass}})
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			return "", fmt.Errorf("create SCRAM user %s: %w", team, err)
		}
		principal := "User:" + team
		own := kadm.NewACLs().Allow(principal).AllowHosts().Topics("sundial.jobs."+team).
			ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpWrite, kadm.OpDescribe)
		answers := kadm.NewACLs().Allow(principal).AllowHosts().Topics("sundial.jobs.status").
			ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead, kadm.OpDescribe)
		for _, b := range []*kadm.ACLBuilder{own, answers} {
			res, err := adm.CreateACLs(ctx, b)
			if err != nil {
				return "", fmt.Errorf("create ACLs for %s: %w", principal, err)
			}
			for _, r := range res {
				if r.Err != nil {
					return "", fmt.Errorf("create ACL %s %s %s for %s: %w", r.Operation, r.Type, r.Name, principal, r.Err)
				}
			}
		}
	}
	return fmt.Sprintf("team users %s may write their topics sundial.jobs.<team> only", strings.Join(teams, ", ")), nil
}

// cassandraRole creates (or updates the password of) a login role that may
// do anything in every keyspace but is no superuser. Then, when
// newAdminPasswordFile is set and differs from the probe's password, it
// changes the password of the role the probe logged in as (the default
// superuser) and records it in the probe's password file only after
// Cassandra accepted it: a run cut short in between leaves the old password
// recorded and working.
func cassandraRole(ctx context.Context, addr string, sec security, role, passwordFile, newAdminPasswordFile string) (string, error) {
	cluster := newCassandraCluster(addr)
	if err := sec.cassandra(cluster); err != nil {
		return "", err
	}
	session, err := cluster.CreateSession()
	if err != nil {
		return "", fmt.Errorf("cql session as %s: %w", sec.cassandraUser, err)
	}
	defer session.Close()
	exec := func(stmt string) error {
		return session.Query(stmt).WithContext(ctx).Consistency(gocql.One).Exec()
	}
	var did []string
	if role != "" {
		pass, err := readSecret(passwordFile)
		if err != nil {
			return "", fmt.Errorf("role %s: %w", role, err)
		}
		if err := exec(fmt.Sprintf("CREATE ROLE IF NOT EXISTS %q WITH LOGIN = true AND SUPERUSER = false AND PASSWORD = %s", role, cqlString(pass))); err != nil {
			return "", fmt.Errorf("create role %s: %w", role, err)
		}
		// The role may exist from an earlier start with another password.
		// Cassandra limits how often a password changes, so it is changed
		// only when the wanted one does not log in.
		if err := canLogIn(addr, sec, role, pass); err != nil {
			if err := exec(fmt.Sprintf("ALTER ROLE %q WITH PASSWORD = %s", role, cqlString(pass))); err != nil {
				return "", fmt.Errorf("set the password of role %s: %w", role, err)
			}
		}
		if err := exec(fmt.Sprintf("GRANT ALL PERMISSIONS ON ALL KEYSPACES TO %q", role)); err != nil {
			return "", fmt.Errorf("grant role %s: %w", role, err)
		}
		did = append(did, fmt.Sprintf("role %s may use every keyspace", role))
	}
	if newAdminPasswordFile != "" {
		next, err := readSecret(newAdminPasswordFile)
		if err != nil {
			return "", fmt.Errorf("new password of %s: %w", sec.cassandraUser, err)
		}
		current, err := readSecret(sec.cassandraPasswordFile)
		if err != nil {
			return "", err
		}
		if next != current {
			if err := exec(fmt.Sprintf("ALTER ROLE %q WITH PASSWORD = %s", sec.cassandraUser, cqlString(next))); err != nil {
				return "", fmt.Errorf("change the password of %s: %w", sec.cassandraUser, err)
			}
			if err := os.WriteFile(sec.cassandraPasswordFile, []byte(next+"\n"), 0o600); err != nil {
				return "", fmt.Errorf("record the new password of %s: %w", sec.cassandraUser, err)
			}
			did = append(did, fmt.Sprintf("the default password of %s changed", sec.cassandraUser))
		}
	}
	if len(did) == 0 {
		return "", errors.New("nothing to provision")
	}
	return strings.Join(did, "; "), nil
}

// cqlString quotes s as a CQL string literal: role statements take no bind
// markers.
func cqlString(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// canLogIn opens and closes a session as user.
func canLogIn(addr string, sec security, user, pass string) error {
	cluster := newCassandraCluster(addr)
	if err := sec.cassandra(cluster); err != nil {
		return err
	}
	cluster.Authenticator = gocql.PasswordAuthenticator{Username: user, Password: pass}
	session, err := cluster.CreateSession()
	if err != nil {
		return err
	}
	session.Close()
	return nil
}
