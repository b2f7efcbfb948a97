// Command stackcheck waits until the backends of the local stack answer real
// requests, or reports why they do not.
//
// deploy/local/stack.sh runs it after starting a backend ("ready" means the
// backend serves clients, not that its port is open) and for `stack.sh
// status`. Each backend named by a flag is probed in parallel:
//
//   - Kafka: a metadata request must list at least one broker advertising the
//     address we dialled and a known controller (KRaft has elected itself).
//   - Cassandra: a CQL session must open and system.local must report
//     bootstrapped = COMPLETED.
//   - Redis: PING must succeed (it fails with LOADING while the AOF is
//     replayed) and INFO reports the server version.
//
// For the local clusters (deploy/local/cluster.sh) two flags ask more:
// -kafka-brokers N wants N brokers in the metadata, and -redis-cluster N
// wants the node's view of the cluster to be healthy (cluster_state ok,
// every slot served) with N masters, each with a replica it sees connected.
//
// A probe stops early when the process named by -<backend>-pid exits, so a
// backend that crashes at startup is reported at once instead of after the
// whole timeout. stackcheck prints one line per backend: "NAME: ready ..." on
// stdout, or "NAME: not ready ..." with the last error on stderr, and exits 1
// when any backend is not ready, 2 on bad usage.
//
// For the secured stack (deploy/local/secure.sh), -tls-ca makes every probe
// use TLS verified against that CA, and -kafka-user, -cassandra-user and
// -redis-user (each with a password file, so no secret shows in ps) log in.
// Once every backend is ready, three flags provision what the servers'
// configuration cannot: -kafka-grant-user creates the ACLs of the
// application user, -cassandra-role creates its role, and
// -cassandra-new-password-file replaces the default superuser's password.
// Each is idempotent, so the stack runs them on every start.
//
// The clients are the ones Sundial itself uses (franz-go's kadm, gocql,
// go-redis), so a backend that stackcheck accepts is one the project's code
// can talk to.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	// go-redis logs failed dials on its own; the probe's error says the same
	// thing once, in the right place.
	redis.SetLogger(&logging.VoidLogger{})
	fs := flag.NewFlagSet("stackcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		kafkaAddr    = fs.String("kafka", "", "Kafka bootstrap address host:port to probe")
		kafkaPID     = fs.Int("kafka-pid", 0, "stop waiting for Kafka when this process exits (0: do not watch)")
		cassAddr     = fs.String("cassandra", "", "Cassandra native transport address host:port to probe")
		cassPID      = fs.Int("cassandra-pid", 0, "stop waiting for Cassandra when this process exits (0: do not watch)")
		redisAddr    = fs.String("redis", "", "Redis address host:port to probe")
		redisPID     = fs.Int("redis-pid", 0, "stop waiting for Redis when this process exits (0: do not watch)")
		kafkaBrokers = fs.Int("kafka-brokers", 1, "how many brokers the Kafka metadata must list")
		cassNodes    = fs.Int("cassandra-nodes", 1, "how many nodes the Cassandra ring must have: the probed node lists at least this many less one peers")
		redisCluster = fs.Int("redis-cluster", 0, "want a healthy Redis Cluster with this many masters, each with a replica (0: a single node)")
		timeout      = fs.Duration("timeout", 3*time.Minute, "how long to wait for each backend")
		interval     = fs.Duration("interval", 500*time.Millisecond, "pause between two probes of a backend")
		progress     = fs.Duration("progress", 15*time.Second, "print a waiting line this often (0: never)")
		probeTimeout = fs.Duration("probe-timeout", 5*time.Second, "time limit of one probe")

		sec        security
		grantUser  = fs.String("kafka-grant-user", "", "once Kafka is ready, allow this user everything on the topics, groups and transactional ids of -kafka-grant-prefix (the probe's user must be a super user)")
		grantPfx   = fs.String("kafka-grant-prefix", "sundial", "names the -kafka-grant-user may use: topics PREFIX.*, groups and transactional ids PREFIX*")
		teams      = fs.String("kafka-teams", "", "once Kafka is ready, create these SCRAM users (comma-separated), each allowed to write its team topic sundial.jobs.<team> and read sundial.jobs.status, nothing else")
		teamsDir   = fs.String("kafka-team-password-dir", "", "folder holding kafka-<team>.password for each of -kafka-teams")
		role       = fs.String("cassandra-role", "", "once Cassandra is ready, create this login role (no superuser) with every permission on every keyspace")
		roleFile   = fs.String("cassandra-role-password-file", "", "file holding the password of -cassandra-role")
		newPwdFile = fs.String("cassandra-new-password-file", "", "once Cassandra is ready, change the password of -cassandra-user to this file's and record it in -cassandra-password-file")
	)
	fs.StringVar(&sec.caFile, "tls-ca", "", "PEM CA file: reach every backend over TLS, verifying its certificate against this CA")
	fs.StringVar(&sec.kafkaUser, "kafka-user", "", "Kafka SASL SCRAM-SHA-512 user")
	fs.StringVar(&sec.kafkaPasswordFile, "kafka-password-file", "", "file holding the password of -kafka-user")
	fs.StringVar(&sec.cassandraUser, "cassandra-user", "", "Cassandra user (PasswordAuthenticator)")
	fs.StringVar(&sec.cassandraPasswordFile, "cassandra-password-file", "", "file holding the password of -cassandra-user")
	fs.StringVar(&sec.redisUser, "redis-user", "", "Redis ACL user")
	fs.StringVar(&sec.redisPasswordFile, "redis-password-file", "", "file holding the password of -redis-user")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var targets []target
	add := func(name, addr string, pid int, p probeFunc) {
		if addr != "" {
			targets = append(targets, target{name: name, addr: addr, pid: pid, probe: p})
		}
	}
	add("kafka", *kafkaAddr, *kafkaPID, kafkaProbe(*kafkaBrokers, sec))
	add("cassandra", *cassAddr, *cassPID, cassandraProbe(*cassNodes, sec))
	add("redis", *redisAddr, *redisPID, redisProbe(*redisCluster, sec))

	var problems []error
	if fs.NArg() > 0 {
		problems = append(problems, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if len(targets) == 0 {
		problems = append(problems, errors.New("name at least one backend: -kafka, -cassandra or -redis"))
	}
	if *timeout <= 0 {
		problems = append(problems, fmt.Errorf("-timeout: must be positive, got %s", *timeout))
	}
	if *interval <= 0 {
		problems = append(problems, fmt.Errorf("-interval: must be positive, got %s", *interval))
	}
	if *probeTimeout <= 0 {
		problems = append(problems, fmt.Errorf("-probe-timeout: must be positive, got %s", *probeTimeout))
	}
	if *kafkaBrokers < 1 {
		problems = append(problems, fmt.Errorf("-kafka-brokers: must be at least 1, got %d", *kafkaBrokers))
	}
	if *cassNodes < 1 {
		problems = append(problems, fmt.Errorf("-cassandra-nodes: must be at least 1, got %d", *cassNodes))
	}
	if *redisCluster < 0 {
		problems = append(problems, fmt.Errorf("-redis-cluster: must not be negative, got %d", *redisCluster))
	}
	problems = append(problems, sec.validate()...)
	if *grantUser != "" && (*kafkaAddr == "" || sec.kafkaUser == "") {
		problems = append(problems, errors.New("-kafka-grant-user: needs -kafka and a super user in -kafka-user"))
	}
	if *teams != "" && (*kafkaAddr == "" || sec.kafkaUser == "" || *teamsDir == "") {
		problems = append(problems, errors.New("-kafka-teams: needs -kafka, -kafka-team-password-dir and a super user in -kafka-user"))
	}
	if *role != "" && (*roleFile == "" || *cassAddr == "" || sec.cassandraUser == "") {
		problems = append(problems, errors.New("-cassandra-role: needs -cassandra-role-password-file, -cassandra and a superuser in -cassandra-user"))
	}
	if *newPwdFile != "" && (*cassAddr == "" || sec.cassandraUser == "") {
		problems = append(problems, errors.New("-cassandra-new-password-file: needs -cassandra and -cassandra-user"))
	}
	if *progress < 0 {
		problems = append(problems, fmt.Errorf("-progress: must not be negative, got %s", *progress))
	}
	if len(problems) > 0 {
		fmt.Fprintln(stderr, "stackcheck:", errors.Join(problems...))
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	opts := waitOptions{
		timeout:      *timeout,
		interval:     *interval,
		probeTimeout: *probeTimeout,
		progress:     *progress,
		alive:        processAlive,
	}
	var (
		mu sync.Mutex // serialises output lines
		wg sync.WaitGroup
		ok = true
	)
	for _, t := range targets {
		wg.Go(func() {
			res := wait(ctx, t, opts, func(line string) {
				mu.Lock()
				defer mu.Unlock()
				fmt.Fprintln(stderr, line)
			})
			mu.Lock()
			defer mu.Unlock()
			if res.err != nil {
				ok = false
				fmt.Fprintf(stderr, "%s: not ready at %s after %s: %v\n", t.name, t.addr, res.elapsed.Round(100*time.Millisecond), res.err)
				return
			}
			fmt.Fprintf(stdout, "%s: ready at %s after %s (%s)\n", t.name, t.addr, res.elapsed.Round(100*time.Millisecond), res.detail)
		})
	}
	wg.Wait()
	if !ok {
		return 1
	}

	// Provisioning, once every backend is ready: users that the servers'
	// own configuration cannot create.
	type step struct {
		name string
		do   func(context.Context) (string, error)
	}
	var steps []step
	if *grantUser != "" {
		steps = append(steps, step{"kafka", func(ctx context.Context) (string, error) {
			return kafkaGrant(ctx, *kafkaAddr, sec, *grantUser, *grantPfx)
		}})
	}
	if *teams != "" {
		steps = append(steps, step{"kafka", func(ctx context.Context) (string, error) {
			return kafkaTeams(ctx, *kafkaAddr, sec, strings.Split(*teams, ","), *teamsDir)
		}})
	}
	if *role != "" || *newPwdFile != "" {
		steps = append(steps, step{"cassandra", func(ctx context.Context) (string, error) {
			return cassandraRole(ctx, *cassAddr, sec, *role, *roleFile, *newPwdFile)
		}})
	}
	for _, s := range steps {
		pctx, cancel := context.WithTimeout(ctx, *timeout)
		detail, err := s.do(pctx)
		cancel()
		if err != nil {
			fmt.Fprintf(stderr, "%s: provisioning failed: %v\n", s.name, err)
			return 1
		}
		fmt.Fprintf(stdout, "%s: %s\n", s.name, detail)
	}
	return 0
}

// processAlive reports whether pid names a live process (a zombie counts as
// exited: it will never serve anything).
func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	return !isZombie(string(stat))
}

// isZombie reads the state field of a /proc/PID/stat line; the command name
// before it is in parentheses and may itself contain spaces or parentheses.
func isZombie(stat string) bool {
	for i := len(stat) - 1; i >= 0; i-- {
		if stat[i] == ')' {
			rest := stat[i+1:]
			return len(rest) >= 2 && rest[0] == ' ' && (rest[1] == 'Z' || rest[1] == 'X')
		}
	}
	return false
}
