package cassandra

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gocql/gocql"

	"github.com/sundialhq/sundial/internal/deps"
)

// Defaults of Config.
const (
	DefaultKeyspace          = "sundial"
	DefaultReplicationFactor = 1
	DefaultConsistency       = "LOCAL_QUORUM"
	DefaultSerialConsistency = "LOCAL_SERIAL"
	DefaultConnectTimeout    = 10 * time.Second
	DefaultTimeout           = 10 * time.Second
	DefaultSchemaTimeout     = time.Minute
	DefaultPageSize          = 5000
	DefaultBucketPageSize    = 128
	DefaultBatchSize         = 200
	DefaultWriteConcurrency  = 8
	DefaultRunRetention      = 7 * 24 * time.Hour
	DefaultNumConns          = 2
)

// Config configures the Cassandra store and its migrations. The zero value of
// every field but Hosts means its default.
type Config struct {
	// Hosts are contact points, "host" or "host:port" (port 9042 when
	// omitted). The driver discovers the rest of the cluster from them.
	Hosts []string
	// Keyspace holds Sundial's tables; default "sundial". An unquoted
	// Cassandra identifier: a letter, then letters, digits or underscores,
	// at most 48 characters.
	Keyspace string
	// ReplicationFactor is the keyspace's replication factor when migrations
	// create it; default 1 (a single local node). Use 3 in production.
	ReplicationFactor int
	// Datacenter, if set, makes the keyspace use NetworkTopologyStrategy
	// with ReplicationFactor replicas in that data centre, and makes the
	// driver prefer its nodes. Empty means SimpleStrategy, for one DC.
	Datacenter string
	// LocalDC, if set, is the data centre whose nodes the driver sends
	// statements to (token-aware within it); default Datacenter. A process
	// in a second data centre names its own here while the keyspace's
	// replication stays as migrations created it.
	LocalDC string
	// Consistency of reads and writes; default LOCAL_QUORUM, so that a
	// write and a later read always overlap in one replica while a node per
	// replica set may be down (with RF 1 it is simply the one replica).
	Consistency string
	// SerialConsistency of lightweight transactions (fencing epochs,
	// watermarks, job rows, cluster init); default LOCAL_SERIAL. SERIAL
	// makes Paxos span data centres.
	SerialConsistency string
	// NodesShareAddress says the cluster's nodes listen on one IP address
	// and differ by port only, as the local three-node cluster runs them
	// (deploy/local/cluster.sh). The driver tracks a node's up and down
	// state by address alone, so there one node's death would mark its
	// neighbours down and leave no host to query. With it set, the store
	// ignores the nodes' status events and never marks a host down: a
	// dead node's empty connection pool is skipped for the next replica
	// and refilled once the node answers again. Leave it off when every
	// node has an address of its own, as in any real deployment.
	NodesShareAddress bool
	// ConnectTimeout bounds dialling and the handshake with each host, so
	// an unreachable cluster fails Open and Migrate in bounded time; default
	// 10s. A busy node can take seconds to answer the handshake, and a
	// host whose every connection fails it is marked down by the driver
	// until its next reconnection attempt, so a tight value turns load into
	// an outage. The caller's context deadline, when sooner, bounds it too.
	ConnectTimeout time.Duration
	// Timeout bounds each query; default 10s.
	Timeout time.Duration
	// SchemaTimeout bounds each schema change of a migration, which waits
	// for the nodes to agree on the schema; default 1m.
	SchemaTimeout time.Duration
	// PageSize is how many rows a history or listing read fetches per
	// round trip; default 5000.
	PageSize int
	// BucketPageSize is how many due entries a bucket read (ListBucket)
	// fetches per round trip; default 128 (two of the dispatcher's pages of
	// 64). It is small because a dispatcher reads a bucket of every shard
	// it owns at once and stops between pages at the look-ahead, keeping
	// the fetched page meanwhile (decoded; ListBucket releases the
	// driver's response first): the frames of 128 shards' waiting reads
	// held 33 MB of its heap at 2,000 triggers/s with 5,000, and 36 MB with
	// 256 (entries carry their job's snapshot, about 1 KB a row).
	BucketPageSize int
	// BatchSize is the most statements in one unlogged (single-partition)
	// batch; default 200.
	BatchSize int
	// WriteConcurrency bounds the batches one PutDue or RecordRuns call has
	// in flight at once; default 8. UpsertJobs sends all of a call's at
	// once, as its caller bounds the call.
	WriteConcurrency int
	// NumConns is the number of connections per host; default 2.
	NumConns int
	// RunRetention is how long run history is kept (a TTL on every write);
	// default 7 days. Cassandra TTLs are whole seconds, at least one.
	RunRetention time.Duration
	// Username and Password, if set, authenticate with
	// PasswordAuthenticator.
	Username string
	Password string
	// TLS, if set, encrypts every connection and verifies the nodes'
	// certificates against it (host verification: the certificate must
	// name the node, or TLS.ServerName when set).
	TLS *tls.Config
	// QueryObserver, if set, is called by the driver after every attempt of
	// every statement (one call per page of a read), with its latency and
	// error: telemetry.CassandraObserver records them as metrics. It must
	// be safe for concurrent use and quick: it runs on the query's path.
	QueryObserver gocql.QueryObserver
	// BatchObserver, if set, is called likewise after every attempt of
	// every batch (the schedule's writes are batches).
	BatchObserver gocql.BatchObserver
	// Now is the clock for the times the store records itself (claims,
	// cluster init, migrations); default time.Now.
	Now func() time.Time
}

var identifier = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_]{0,47}$`)

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	c.Keyspace = cmp.Or(c.Keyspace, DefaultKeyspace)
	c.ReplicationFactor = cmp.Or(c.ReplicationFactor, DefaultReplicationFactor)
	c.Consistency = cmp.Or(c.Consistency, DefaultConsistency)
	c.SerialConsistency = cmp.Or(c.SerialConsistency, DefaultSerialConsistency)
	c.ConnectTimeout = cmp.Or(c.ConnectTimeout, DefaultConnectTimeout)
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.SchemaTimeout = cmp.Or(c.SchemaTimeout, DefaultSchemaTimeout)
	c.PageSize = cmp.Or(c.PageSize, DefaultPageSize)
	c.BucketPageSize = cmp.Or(c.BucketPageSize, DefaultBucketPageSize)
	c.BatchSize = cmp.Or(c.BatchSize, DefaultBatchSize)
	c.WriteConcurrency = cmp.Or(c.WriteConcurrency, DefaultWriteConcurrency)
	c.NumConns = cmp.Or(c.NumConns, DefaultNumConns)
	c.RunRetention = cmp.Or(c.RunRetention, DefaultRunRetention)
	c.LocalDC = cmp.Or(c.LocalDC, c.Datacenter)
	c.Now = deps.Clock(c.Now)
	return c
}

// Validate reports every bad field, after defaults are applied.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(field string, format string, args ...any) {
		errs = append(errs, fmt.Errorf("cassandra config: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if len(c.Hosts) == 0 {
		bad("hosts", "at least one contact point is required")
	}
	for _, h := range c.Hosts {
		if err := checkHost(h); err != nil {
			bad("hosts", "%q: %v", h, err)
		}
	}
	if !identifier.MatchString(c.Keyspace) {
		bad("keyspace", "%q: must be a letter then letters, digits or underscores, at most 48 characters", c.Keyspace)
	}
	if c.ReplicationFactor < 1 {
		bad("replication factor", "%d: must be at least 1", c.ReplicationFactor)
	}
	if _, err := gocql.ParseConsistencyWrapper(c.Consistency); err != nil {
		bad("consistency", "%q: not a consistency level (e.g. LOCAL_QUORUM, QUORUM, ONE)", c.Consistency)
	}
	var serial gocql.SerialConsistency
	if err := serial.UnmarshalText([]byte(c.SerialConsistency)); err != nil {
		bad("serial consistency", "%q: must be SERIAL or LOCAL_SERIAL", c.SerialConsistency)
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{
		{"connect timeout", c.ConnectTimeout}, {"timeout", c.Timeout}, {"schema timeout", c.SchemaTimeout},
	} {
		if d.v < 0 {
			bad(d.field, "%s: must be positive", d.v)
		}
	}
	if c.RunRetention < time.Second {
		bad("run retention", "%s: must be at least 1s (Cassandra TTLs are whole seconds)", c.RunRetention)
	}
	if c.RunRetention > 20*365*24*time.Hour {
		bad("run retention", "%s: Cassandra TTLs cannot exceed 20 years", c.RunRetention)
	}
	for _, n := range []struct {
		field string
		v     int
	}{
		{"page size", c.PageSize}, {"bucket page size", c.BucketPageSize}, {"batch size", c.BatchSize}, {"write concurrency", c.WriteConcurrency}, {"num conns", c.NumConns},
	} {
		if n.v < 1 {
			bad(n.field, "%d: must be at least 1", n.v)
		}
	}
	if (c.Username == "") != (c.Password == "") {
		bad("username/password", "set both or neither")
	}
	return errors.Join(errs...)
}

// checkHost accepts "host" and "host:port".
func checkHost(h string) error {
	if strings.TrimSpace(h) == "" {
		return errors.New("empty")
	}
	if !strings.Contains(h, ":") || strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		return nil
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		if strings.Count(h, ":") > 1 { // a bare IPv6 address
			return nil
		}
		return err
	}
	if host == "" {
		return errors.New("missing host")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("port %q: must be 1-65535", port)
	}
	return nil
}
