package cassandra

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gocql/gocql"

	"github.com/sundialhq/sundial/internal/backoff"
	"github.com/sundialhq/sundial/store"
)

// Store is the Cassandra implementation of store.Store. It is safe for
// concurrent use.
type Store struct {
	cfg    Config
	sess   *gocql.Session
	serial gocql.Consistency // SerialConsistency as a read consistency
	q      statements
	// cross: unlogged batches may span partitions, because every node
	// replicates every partition of the keyspace (batching.go).
	cross bool

	mu     sync.Mutex
	shards int // S once read; 0 until then
	// loadShards admits one reader of S at a time (a buffered channel of
	// one, so a waiter's context can end its wait).
	loadShards chan struct{}
}

var _ store.Store = (*Store)(nil)

// Open connects to the cluster and checks that the keyspace has been
// migrated to this build's schema. It does not create anything: that is
// Migrate's job (`sundial migrate`).
func Open(ctx context.Context, c Config) (*Store, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	sess, err := connect(ctx, c, c.Timeout)
	if err != nil {
		return nil, err
	}
	if err := checkSchema(ctx, sess, c); err != nil {
		sess.Close()
		return nil, err
	}
	cross, err := fullReplicas(ctx, sess, c.Keyspace)
	if err != nil {
		sess.Close()
		return nil, err
	}
	var serial gocql.SerialConsistency
	_ = serial.UnmarshalText([]byte(c.SerialConsistency)) // validated
	return &Store{cfg: c, sess: sess, serial: gocql.Consistency(serial), q: newStatements(c.Keyspace), cross: cross, loadShards: make(chan struct{}, 1)}, nil
}

// Ping reads the coordinator's release version from system.local: it
// succeeds when a node answers a query, whatever the state of Sundial's
// keyspace. A process's readiness check.
func (s *Store) Ping(ctx context.Context) error {
	var version string
	if err := s.query(ctx, `SELECT release_version FROM system.local`).Idempotent(true).Scan(&version); err != nil {
		return fmt.Errorf("ping cassandra: %w", err)
	}
	return nil
}

// Close closes the session.
func (s *Store) Close() error {
	s.sess.Close()
	return nil
}

// statements are the store's CQL, with the keyspace filled in. gocql
// prepares each on first use per host and reuses it.
type statements struct {
	insertCluster, selectCluster string

	selectJob, selectJobs, selectJobState, selectJobStates, writeJob, listJobsFirst, listJobsAfter string

	insertDue, selectBucket, deleteDue, deleteBucket string

	selectShard, insertShard, claimShard, advanceWatermark string

	insertRun, selectRuns string

	insertTeamRun, selectTeamRuns string
}

func newStatements(ks string) statements {
	f := func(format string) string { return fmt.Sprintf(format, ks) }
	return statements{
		insertCluster: f(`INSERT INTO %s.cluster_config (id, shards, created_at) VALUES ('cluster', ?, ?) IF NOT EXISTS`),
		selectCluster: f(`SELECT shards, created_at FROM %s.cluster_config WHERE id = 'cluster'`),

		selectJob:       f(`SELECT spec, hash, revision, updated_at, deleted, next_due FROM %s.jobs WHERE id = ?`),
		selectJobs:      f(`SELECT id, spec, hash, revision, updated_at, deleted, next_due FROM %s.jobs WHERE id IN ?`),
		selectJobState:  f(`SELECT hash, revision, updated_at, deleted, next_due FROM %s.jobs WHERE id = ?`),
		selectJobStates: f(`SELECT id, hash, revision, updated_at, deleted, next_due FROM %s.jobs WHERE id IN ?`),
		writeJob:        f(`INSERT INTO %s.jobs (id, spec, hash, revision, updated_at, deleted, next_due) VALUES (?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?`),
		// Listings walk the partitioner's token order, the only order in
		// which a table keyed by id alone can be paged.
		listJobsFirst: f(`SELECT id, spec, hash, revision, updated_at, deleted, next_due FROM %s.jobs LIMIT ?`),
		listJobsAfter: f(`SELECT id, spec, hash, revision, updated_at, deleted, next_due FROM %s.jobs WHERE token(id) > token(?) LIMIT ?`),

		insertDue:    f(`INSERT INTO %s.due_entries (bucket, shard, due, job_id, kind, run_id, attempt, revision, payload) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		selectBucket: f(`SELECT due, job_id, kind, run_id, attempt, revision, payload FROM %s.due_entries WHERE bucket = ? AND shard = ?`),
		deleteDue:    f(`DELETE FROM %s.due_entries WHERE bucket = ? AND shard = ? AND due = ? AND job_id = ? AND kind = ? AND run_id = ?`),
		deleteBucket: f(`DELETE FROM %s.due_entries WHERE bucket = ? AND shard = ?`),

		selectShard:      f(`SELECT epoch, owner, watermark, claimed_at FROM %s.shards WHERE shard = ?`),
		insertShard:      f(`INSERT INTO %s.shards (shard, epoch, owner, watermark, claimed_at) VALUES (?, 1, ?, ?, ?) IF NOT EXISTS`),
		claimShard:       f(`UPDATE %s.shards SET epoch = ?, owner = ?, claimed_at = ? WHERE shard = ? IF epoch = ?`),
		advanceWatermark: f(`UPDATE %s.shards SET watermark = ? WHERE shard = ? IF epoch = ? AND watermark < ?`),

		insertRun: f(`INSERT INTO %s.runs (job_id, due, run_id, attempt, attempt_due, state, started_at, finished_at, duration_ms, error, updated_at, log,
			owner_team, wait_reason, dispatched_at, received_at, leased_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ? AND TIMESTAMP ?`),
		selectRuns: f(`SELECT job_id, due, run_id, attempt, attempt_due, state, started_at, finished_at, duration_ms, error, updated_at, log,
			owner_team, wait_reason, dispatched_at, received_at, leased_at FROM %s.runs WHERE job_id = ?`),
		insertTeamRun: f(`INSERT INTO %s.runs_by_time (owner_team, bucket, due, run_id, attempt, job_id, attempt_due, state, started_at, finished_at,
			duration_ms, error, updated_at, wait_reason, dispatched_at, received_at, leased_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ? AND TIMESTAMP ?`),
		selectTeamRuns: f(`SELECT job_id, due, run_id, attempt, attempt_due, state, started_at, finished_at, duration_ms, error, updated_at,
			owner_team, wait_reason, dispatched_at, received_at, leased_at FROM %s.runs_by_time WHERE owner_team = ? AND bucket = ? AND due >= ? AND due <= ?`),
	}
}

// query returns a statement bound to ctx at the store's consistency.
func (s *Store) query(ctx context.Context, stmt string, args ...any) *gocql.Query {
	return s.sess.Query(stmt, args...).WithContext(ctx)
}

// idempotent returns a plain statement the driver may retry.
func (s *Store) idempotent(ctx context.Context, stmt string, args ...any) *gocql.Query {
	return s.query(ctx, stmt, args...).Idempotent(true)
}

// serialRead returns a read at serial consistency: it sees the outcome of
// every lightweight transaction that completed, and finishes any in flight.
func (s *Store) serialRead(ctx context.Context, stmt string, args ...any) *gocql.Query {
	return s.query(ctx, stmt, args...).Consistency(s.serial).Idempotent(true)
}

// casUnknown reports an error after which a lightweight transaction may or
// may not have been applied: the store reads back to find out.
func casUnknown(err error) bool {
	var wt *gocql.RequestErrWriteTimeout
	return errors.As(err, &wt) || errors.Is(err, gocql.ErrTimeoutNoResponse)
}

// casAttempts bounds the read-decide-write loops of lightweight transactions
// that lose to a concurrent writer or time out.
const casAttempts = 8

// contention is the wait between the attempts of one contended
// transaction: jittered, so that the writers that lost together do not
// collide again on their next attempt.
func contention() *backoff.Backoff { return backoff.New(10*time.Millisecond, 640*time.Millisecond) }

// waitContended waits before another attempt of a contended transaction.
func waitContended(ctx context.Context, b *backoff.Backoff) error {
	if !b.Wait(ctx) {
		return context.Cause(ctx)
	}
	return nil
}

// ms converts a time to the driver's timestamp value at millisecond
// precision; zero stays zero (written as null).
func ms(t time.Time) time.Time { return store.Truncate(t) }

// fromDB reads a timestamp column: null is the zero time, the rest UTC.
func fromDB(t time.Time) time.Time {
	if t.IsZero() || t.UnixMilli() == 0 {
		return time.Time{}
	}
	return t.UTC()
}

// InitCluster implements store.Cluster.
func (s *Store) InitCluster(ctx context.Context, shards int) (store.ClusterConfig, error) {
	if shards <= 0 {
		return store.ClusterConfig{}, fmt.Errorf("init cluster: %w: shards %d: must be positive", store.ErrInvalid, shards)
	}
	now := ms(s.cfg.Now())
	applied, err := s.query(ctx, s.q.insertCluster, shards, now).MapScanCAS(map[string]any{})
	if err != nil && !casUnknown(err) {
		return store.ClusterConfig{}, fmt.Errorf("init cluster with %d shards: %w", shards, err)
	}
	if err == nil && applied {
		s.setShards(shards)
		return store.ClusterConfig{Shards: shards, CreatedAt: now}, nil
	}
	cfg, err := s.GetClusterConfig(ctx)
	if err != nil {
		return store.ClusterConfig{}, fmt.Errorf("init cluster with %d shards: %w", shards, err)
	}
	if cfg.Shards != shards {
		return store.ClusterConfig{}, fmt.Errorf("init cluster: %w", &store.ShardCountError{Stored: cfg.Shards, Requested: shards})
	}
	return cfg, nil
}

// GetClusterConfig implements store.Cluster.
func (s *Store) GetClusterConfig(ctx context.Context) (store.ClusterConfig, error) {
	var cfg store.ClusterConfig
	err := s.serialRead(ctx, s.q.selectCluster).Scan(&cfg.Shards, &cfg.CreatedAt)
	if errors.Is(err, gocql.ErrNotFound) {
		return store.ClusterConfig{}, fmt.Errorf("get cluster config: %w", store.ErrNotInitialized)
	}
	if err != nil {
		return store.ClusterConfig{}, fmt.Errorf("get cluster config: %w", err)
	}
	cfg.CreatedAt = fromDB(cfg.CreatedAt)
	s.setShards(cfg.Shards)
	return cfg, nil
}

func (s *Store) setShards(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shards = n
}

// shardCount returns S, reading it once; S never changes after init. The
// first writes of a new Store often come as a burst (a herd of firings, a
// benchmark's 64 writers): they share one read, because as many serial reads
// of one row contend in Paxos and, on a node just started, time out.
func (s *Store) shardCount(ctx context.Context) (int, error) {
	if n := s.knownShards(); n > 0 {
		return n, nil
	}
	select {
	case s.loadShards <- struct{}{}:
	case <-ctx.Done():
		return 0, fmt.Errorf("get cluster config: %w", ctx.Err())
	}
	defer func() { <-s.loadShards }()
	if n := s.knownShards(); n > 0 {
		return n, nil // read by the caller before us
	}
	cfg, err := s.GetClusterConfig(ctx)
	if err != nil {
		return 0, err
	}
	return cfg.Shards, nil
}

func (s *Store) knownShards() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shards
}

func (s *Store) checkShard(ctx context.Context, shard int) error {
	n, err := s.shardCount(ctx)
	if err != nil {
		return err
	}
	return store.CheckShard(shard, n)
}
