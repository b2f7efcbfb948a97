package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/gocql/gocql"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sundialhq/sundial/internal/connect"
	"github.com/sundialhq/sundial/internal/topics"
	"github.com/sundialhq/sundial/store/cassandra"
)

// Backends are the addresses of the real stack.
type Backends struct {
	Brokers        []string
	CassandraHosts []string
	RedisAddr      string
	// PostgresURL is the PostgreSQL of the River peer
	// (deploy/local/postgres.sh); empty: no River peer.
	PostgresURL string
}

// redactURL is a connection URL without its password, for logs.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(a URL that does not parse)"
	}
	return u.Redacted()
}

// Kafka is how to reach the stack's Kafka, in the settings every sundial
// command uses: the stack's brokers, no TLS and no SASL.
func (b Backends) Kafka() connect.Kafka { return connect.Kafka{Brokers: b.Brokers} }

// kafka returns the options of a bench Kafka client: those of b.Kafka,
// then more.
func (b Backends) kafka(more ...kgo.Opt) ([]kgo.Opt, error) {
	opts, err := b.Kafka().Options()
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	return append(opts, more...), nil
}

// newKafkaClient is a client of b.Kafka with the options more.
func (b Backends) newKafkaClient(more ...kgo.Opt) (*kgo.Client, error) {
	opts, err := b.kafka(more...)
	if err != nil {
		return nil, err
	}
	return kgo.NewClient(opts...)
}

// Validate reports every missing address.
func (b Backends) Validate() error {
	var errs []error
	if len(b.Brokers) == 0 {
		errs = append(errs, errors.New("bench: kafka brokers: required (SUNDIAL_KAFKA_BROKERS; `make stack-up` and `source <(deploy/local/stack.sh env)`)"))
	}
	if len(b.CassandraHosts) == 0 {
		errs = append(errs, errors.New("bench: cassandra hosts: required (SUNDIAL_CASSANDRA_HOSTS)"))
	}
	if b.RedisAddr == "" {
		errs = append(errs, errors.New("bench: redis address: required (SUNDIAL_REDIS_ADDR)"))
	}
	return errors.Join(errs...)
}

// Namespace keeps one bench run apart from everything else on the stack:
// its own topic prefix, keyspace and Redis key prefix, all removed by
// Teardown.
type Namespace struct {
	ID          string `json:"id"`
	TopicPrefix string `json:"topic_prefix"`
	Keyspace    string `json:"keyspace"`
	RedisPrefix string `json:"redis_prefix"`
}

// NewNamespace names a namespace after the scenario and the time.
func NewNamespace(scenario string, now time.Time) Namespace {
	id := fmt.Sprintf("%s%d", scenario, now.Unix()%1_000_000_000)
	return Namespace{
		ID:          id,
		TopicPrefix: "bench." + id + ".",
		Keyspace:    "bench_" + id,
		RedisPrefix: "bench:" + id + ":",
	}
}

// Step is the namespace of step i of a run in n: topics, keyspace and Redis
// keys of its own, so that what one step left behind (runs still on its
// topics, due entries still in its keyspace) cannot reach the next.
func (n Namespace) Step(i int) Namespace {
	id := fmt.Sprintf("%ss%d", n.ID, i)
	return Namespace{
		ID:          id,
		TopicPrefix: "bench." + id + ".",
		Keyspace:    "bench_" + id,
		RedisPrefix: "bench:" + id + ":",
	}
}

// Names are the topic names of the namespace.
func (n Namespace) Names() topics.Names { return topics.Names{Prefix: n.TopicPrefix} }

// Setup creates the keyspace (the store's migrations, shards fixed) and the
// topics. The run topics get message.timestamp.type=LogAppendTime, so that
// a run record's timestamp is the moment the broker appended it: the
// dispatch latency the load generator reads from it is then Kafka's ack
// minus the due time (see package loadgen).
func (n Namespace) Setup(ctx context.Context, b Backends, shards int) error {
	// Setup is idempotent; a loaded node sometimes times out a schema
	// change, so try it a few times.
	var err error
	for range 3 {
		if _, err = cassandra.Setup(ctx, cassandra.Config{Hosts: b.CassandraHosts, Keyspace: n.Keyspace}, shards); err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("bench: keyspace %s: %w", n.Keyspace, err)
	}
	specs, err := n.Names().Specs(shards)
	if err != nil {
		return err
	}
	runs := map[string]bool{}
	for _, t := range n.Names().AllRuns() {
		runs[t] = true
	}
	for i, s := range specs {
		if runs[s.Name] {
			cfg := map[string]string{"message.timestamp.type": "LogAppendTime"}
			for k, v := range s.Configs {
				cfg[k] = v
			}
			specs[i].Configs = cfg
		}
	}
	cl, err := b.newKafkaClient()
	if err != nil {
		return fmt.Errorf("bench: kafka: %w", err)
	}
	defer cl.Close()
	if _, err := topics.Ensure(ctx, kadm.NewClient(cl), specs, 1); err != nil {
		return fmt.Errorf("bench: topics: %w", err)
	}
	return nil
}

// Teardown deletes the namespace's topics, keyspace and Redis keys, and
// reports every failure.
func (n Namespace) Teardown(ctx context.Context, b Backends) error {
	var errs []error
	if cl, err := b.newKafkaClient(); err != nil {
		errs = append(errs, err)
	} else {
		adm := kadm.NewClient(cl)
		list, err := adm.ListTopics(ctx)
		if err != nil {
			errs = append(errs, err)
		}
		var mine []string
		for _, t := range list.Names() {
			if strings.HasPrefix(t, n.TopicPrefix) {
				mine = append(mine, t)
			}
		}
		if len(mine) > 0 {
			if _, err := adm.DeleteTopics(ctx, mine...); err != nil {
				errs = append(errs, fmt.Errorf("delete topics: %w", err))
			}
		}
		cl.Close()
	}
	if err := dropKeyspace(ctx, b.CassandraHosts, n.Keyspace); err != nil {
		errs = append(errs, err)
	}
	rc := redis.NewClient(&redis.Options{Addr: b.RedisAddr})
	defer func() { _ = rc.Close() }()
	if err := deleteKeys(ctx, rc, n.RedisPrefix+"*"); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func cassandraSession(hosts []string) (*gocql.Session, error) {
	var addrs []string
	port := 9042
	for _, h := range hosts {
		host, p, ok := strings.Cut(h, ":")
		if ok {
			if v, err := strconv.Atoi(p); err == nil {
				port = v
			}
		}
		addrs = append(addrs, host)
	}
	c := gocql.NewCluster(addrs...)
	c.Port = port
	c.Timeout = 2 * time.Minute
	c.ConnectTimeout = 10 * time.Second
	c.DisableInitialHostLookup = true
	return c.CreateSession()
}

func dropKeyspace(ctx context.Context, hosts []string, ks string) error {
	s, err := cassandraSession(hosts)
	if err != nil {
		return fmt.Errorf("drop keyspace %s: %w", ks, err)
	}
	defer s.Close()
	if err := s.Query("DROP KEYSPACE IF EXISTS " + ks).WithContext(ctx).Exec(); err != nil {
		return fmt.Errorf("drop keyspace %s: %w", ks, err)
	}
	return nil
}

func deleteKeys(ctx context.Context, rc *redis.Client, pattern string) error {
	var cursor uint64
	for {
		keys, next, err := rc.Scan(ctx, cursor, pattern, 10000).Result()
		if err != nil {
			return fmt.Errorf("redis scan %s: %w", pattern, err)
		}
		if len(keys) > 0 {
			if err := rc.Unlink(ctx, keys...).Err(); err != nil {
				return fmt.Errorf("redis unlink: %w", err)
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// Machine describes where the bench ran.
type Machine struct {
	Cores       int     `json:"cores"`
	MemoryBytes uint64  `json:"memory_bytes"`
	CPU         string  `json:"cpu"`
	OS          string  `json:"os"`
	Arch        string  `json:"arch"`
	GoVersion   string  `json:"go_version"`
	LoadAvg1    float64 `json:"load_avg_1m_at_start"`
	Note        string  `json:"note"`
}

// DescribeMachine reads /proc where it exists.
func DescribeMachine() Machine {
	m := Machine{Cores: runtime.NumCPU(), OS: runtime.GOOS, Arch: runtime.GOARCH, GoVersion: runtime.Version(),
		Note: "shared with the Kafka, Cassandra and Redis of the stack and with the pipeline under test"}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
				kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				m.MemoryBytes = kb * 1024
			}
		}
		_ = f.Close()
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
		_ = f.Close()
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			m.LoadAvg1, _ = strconv.ParseFloat(f[0], 64)
		}
	}
	return m
}

// Commit is the source the bench ran.
type Commit struct {
	Hash  string `json:"hash"`
	Dirty bool   `json:"dirty"`
}

// DescribeCommit asks git about the working tree.
func DescribeCommit(ctx context.Context) Commit {
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "HEAD").Output()
	if err != nil {
		return Commit{Hash: "unknown"}
	}
	c := Commit{Hash: strings.TrimSpace(string(out))}
	if st, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil {
		c.Dirty = len(strings.TrimSpace(string(st))) > 0
	}
	return c
}

// BackendVersions are what the stack reports about itself.
type BackendVersions struct {
	Kafka          string   `json:"kafka"`
	KafkaBrokers   []string `json:"kafka_brokers"`
	Cassandra      string   `json:"cassandra"`
	CassandraHosts []string `json:"cassandra_hosts"`
	Redis          string   `json:"redis"`
	RedisAddr      string   `json:"redis_addr"`
	// Embedded is always false: the bench refuses the embedded backends.
	Embedded bool `json:"embedded"`
}

// DescribeBackends asks each backend for its version. Kafka has no version
// request: the version is franz-go's guess from the API versions the broker
// supports.
func DescribeBackends(ctx context.Context, b Backends) BackendVersions {
	v := BackendVersions{KafkaBrokers: b.Brokers, CassandraHosts: b.CassandraHosts, RedisAddr: b.RedisAddr}
	if cl, err := b.newKafkaClient(); err == nil {
		if vs, err := kadm.NewClient(cl).ApiVersions(ctx); err == nil {
			for _, bv := range vs.Sorted() {
				if bv.Err == nil {
					v.Kafka = kversion.FromApiVersionsResponse(bv.Raw()).VersionGuess()
					break
				}
			}
		}
		cl.Close()
	}
	if s, err := cassandraSession(b.CassandraHosts); err == nil {
		var rv string
		if err := s.Query("SELECT release_version FROM system.local").WithContext(ctx).Scan(&rv); err == nil {
			v.Cassandra = rv
		}
		s.Close()
	}
	rc := redis.NewClient(&redis.Options{Addr: b.RedisAddr})
	v.Redis = redisVersion(ctx, rc)
	_ = rc.Close()
	return v
}
