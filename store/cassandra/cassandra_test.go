package cassandra_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/auth"
	"github.com/sundialhq/sundial/auth/authtest"
	"github.com/sundialhq/sundial/internal/testenv"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/cassandra"
	"github.com/sundialhq/sundial/store/storetest"
)

// setup gives the test a migrated keyspace of its own.
func setup(t testing.TB, mutate ...func(*cassandra.Config)) (cassandra.Config, *cassandra.Store) {
	t.Helper()
	env := testenv.NeedCassandra(t)
	cfg := cassandra.Config{Hosts: env.Hosts, Keyspace: env.Keyspace}
	for _, m := range mutate {
		m(&cfg)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	_, err := cassandra.Migrate(ctx, cfg)
	require.NoError(t, err)
	s, err := cassandra.Open(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return cfg, s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		_, s := setup(t)
		return s
	})
}

func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	env := testenv.NeedCassandra(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cfg := cassandra.Config{Hosts: env.Hosts, Keyspace: env.Keyspace}

	_, err := cassandra.Open(ctx, cfg)
	require.ErrorContains(t, err, "does not exist: run `sundial migrate`", "opening before migrating")

	first, err := cassandra.Migrate(ctx, cfg)
	require.NoError(t, err)
	assert.True(t, first.KeyspaceCreated)
	assert.Equal(t, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, first.Applied)
	assert.Equal(t, cassandra.SchemaVersion(), first.Version)

	again, err := cassandra.Migrate(ctx, cfg)
	require.NoError(t, err)
	assert.False(t, again.KeyspaceCreated)
	assert.Empty(t, again.Applied, "a second run applies nothing")
	assert.Equal(t, cassandra.SchemaVersion(), again.Version)

	s, err := cassandra.Open(ctx, cfg)
	require.NoError(t, err)
	defer s.Close()

	// The keyspace exists now with RF 1: asking for another replication is
	// refused rather than silently ignored.
	cfg.ReplicationFactor = 2
	_, err = cassandra.Migrate(ctx, cfg)
	require.Error(t, err)
	assert.ErrorContains(t, err, "replication factor")
}

func TestMigrateRejectsReplicationAboveNodes(t *testing.T) {
	t.Parallel()
	env := testenv.NeedCassandra(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err := cassandra.Migrate(ctx, cassandra.Config{Hosts: env.Hosts, Keyspace: env.Keyspace, ReplicationFactor: 5})
	require.ErrorContains(t, err, "replication factor: 5")
	assert.ErrorContains(t, err, "node(s)")
}

func TestRunRetentionExpires(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	due := time.Now().UTC()
	rec := store.RunRecord{JobID: "ttl", RunID: store.RunID("ttl", due), Attempt: 1, Due: due, State: store.StateSucceeded, UpdatedAt: due}

	// Every run row carries the configured retention as its TTL. The row is
	// read back as long as it takes: with an hour's TTL a busy machine
	// cannot make it expire before the read.
	cfg, kept := setup(t, func(c *cassandra.Config) { c.RunRetention = time.Hour })
	require.NoError(t, kept.RecordRun(ctx, rec))
	runs, err := kept.ListRuns(ctx, "ttl", 10)
	require.NoError(t, err)
	require.Len(t, runs, 1)
	cluster := gocql.NewCluster(cfg.Hosts...)
	sess, err := cluster.CreateSession()
	require.NoError(t, err)
	defer sess.Close()
	var ttl int
	require.NoError(t, sess.Query("SELECT TTL(state) FROM "+cfg.Keyspace+".runs WHERE job_id = ?", "ttl").WithContext(ctx).Scan(&ttl))
	assert.Greater(t, ttl, 0, "the row expires")
	assert.LessOrEqual(t, ttl, 3600, "no longer than the retention")

	// Cassandra expires the row after its TTL: a one-second retention is
	// gone when polled, however long the write and the poll take.
	_, short := setup(t, func(c *cassandra.Config) { c.RunRetention = time.Second })
	short1 := rec
	short1.JobID = "ttl-short"
	short1.RunID = store.RunID("ttl-short", due)
	require.NoError(t, short.RecordRun(ctx, short1))
	require.Eventually(t, func() bool {
		runs, err := short.ListRuns(ctx, "ttl-short", 10)
		return err == nil && len(runs) == 0
	}, 2*time.Minute, 200*time.Millisecond, "a row with a 1s TTL never expired")
}

// closedPort returns an address where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// muteListener returns the address of a listener that accepts connections
// and never writes a byte, like a port that is not Cassandra's.
func muteListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		_ = l.Close()
		wg.Wait()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}

func TestUnreachableFailsWithinTimeout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		host string
	}{
		{"refused", closedPort(t)},
		// TEST-NET-1 (RFC 5737) is never routed: the dial hangs until it
		// times out, or fails at once where there is no route.
		{"unrouted", "192.0.2.1:9042"},
		// Accepts TCP but never answers the CQL handshake.
		{"mute", muteListener(t)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			const budget = 3 * time.Second
			cfg := cassandra.Config{Hosts: []string{tt.host}, Keyspace: "unreachable", ConnectTimeout: time.Second}
			for _, op := range []struct {
				name string
				fn   func(context.Context) error
			}{
				{"migrate", func(ctx context.Context) error { _, err := cassandra.Migrate(ctx, cfg); return err }},
				{"open", func(ctx context.Context) error { _, err := cassandra.Open(ctx, cfg); return err }},
				// The default connect timeout is longer than the budget:
				// the caller's deadline bounds it.
				{"open with the default connect timeout", func(ctx context.Context) error {
					def := cfg
					def.ConnectTimeout = 0
					_, err := cassandra.Open(ctx, def)
					return err
				}},
			} {
				ctx, cancel := context.WithTimeout(t.Context(), budget)
				start := time.Now()
				err := op.fn(ctx)
				took := time.Since(start)
				cancel()
				require.Error(t, err, op.name)
				assert.True(t, errors.Is(err, cassandra.ErrUnreachable), "%s: %v", op.name, err)
				assert.ErrorContains(t, err, tt.host, "%s names the host", op.name)
				assert.Less(t, took, budget+500*time.Millisecond, "%s took %v", op.name, took)
				t.Logf("%s against %s failed after %v: %v", op.name, tt.host, took.Round(time.Millisecond), err)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		cfg   cassandra.Config
		field []string
	}{
		{"defaults", cassandra.Config{Hosts: []string{"127.0.0.1"}}, nil},
		{"host and port", cassandra.Config{Hosts: []string{"127.0.0.1:19042", "db-2:9042"}}, nil},
		{"no hosts", cassandra.Config{}, []string{"hosts"}},
		{"bad port", cassandra.Config{Hosts: []string{"db:99999"}}, []string{"hosts", "99999"}},
		{"empty host", cassandra.Config{Hosts: []string{" "}}, []string{"hosts"}},
		{"keyspace", cassandra.Config{Hosts: []string{"db"}, Keyspace: "drop table;"}, []string{"keyspace"}},
		{"keyspace too long", cassandra.Config{Hosts: []string{"db"}, Keyspace: "k234567890123456789012345678901234567890123456789"}, []string{"keyspace"}},
		{"replication", cassandra.Config{Hosts: []string{"db"}, ReplicationFactor: -1}, []string{"replication factor"}},
		{"consistency", cassandra.Config{Hosts: []string{"db"}, Consistency: "MOST"}, []string{"consistency"}},
		{"serial", cassandra.Config{Hosts: []string{"db"}, SerialConsistency: "QUORUM"}, []string{"serial consistency"}},
		{"timeouts", cassandra.Config{Hosts: []string{"db"}, ConnectTimeout: -1, Timeout: -1}, []string{"connect timeout", "timeout"}},
		{"retention", cassandra.Config{Hosts: []string{"db"}, RunRetention: time.Millisecond}, []string{"run retention"}},
		{"sizes", cassandra.Config{Hosts: []string{"db"}, PageSize: -1, BucketPageSize: -1, BatchSize: -1, WriteConcurrency: -1}, []string{"page size", "bucket page size", "batch size", "write concurrency"}},
		{"credentials", cassandra.Config{Hosts: []string{"db"}, Username: "u"}, []string{"username/password"}},
		{"everything at once", cassandra.Config{ReplicationFactor: -1, Consistency: "x"}, []string{"hosts", "replication factor", "consistency"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Validate()
			if tt.field == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, f := range tt.field {
				assert.ErrorContains(t, err, f)
			}
		})
	}
}

func TestTokenStoreConformance(t *testing.T) {
	t.Parallel()
	authtest.Run(t, func(t *testing.T) auth.TokenStore {
		_, s := setup(t)
		return s
	})
}
