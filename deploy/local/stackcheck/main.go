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
		redisCluster = fs.Int("redis-cluster", 0, "want a healthy Redis Cluster with this many masters, each with a replica (0: a single node)")
		timeout      = fs.Duration("timeout", 3*time.Minute, "how long to wait for each backend")
		interval     = fs.Duration("interval", 500*time.Millisecond, "pause between two probes of a backend")
		progress     = fs.Duration("progress", 15*time.Second, "print a waiting line this often (0: never)")
		probeTimeout = fs.Duration("probe-timeout", 5*time.Second, "time limit of one probe")
	)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var targets []target
	add := func(name, addr string, pid int, p probeFunc) {
		if addr != "" {
			targets = append(targets, target{name: name, addr: addr, pid: pid, probe: p})
		}
	}
	add("kafka", *kafkaAddr, *kafkaPID, kafkaProbe(*kafkaBrokers))
	add("cassandra", *cassAddr, *cassPID, probeCassandra)
	add("redis", *redisAddr, *redisPID, redisProbe(*redisCluster))

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
	if *redisCluster < 0 {
		problems = append(problems, fmt.Errorf("-redis-cluster: must not be negative, got %d", *redisCluster))
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
