package cassandra

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gocql/gocql"
)

// migration is one versioned schema change. Its statements are idempotent
// (IF NOT EXISTS), so a migration interrupted half-way is simply run again;
// its version is recorded in schema_migrations only after all of them
// succeeded. Statements name tables as %[1]s.table, the keyspace.
type migration struct {
	version     int
	description string
	statements  []string
}

// migrations is the schema's history. Append only: never edit a migration
// that has been released, add a new one.
var migrations = []migration{
	{
		version:     1,
		description: "cluster config, jobs, due entries, shards, run history",
		statements: []string{
			// One row: the shard count S, written once with IF NOT EXISTS.
			`CREATE TABLE IF NOT EXISTS %[1]s.cluster_config (
				id text PRIMARY KEY,
				shards int,
				created_at timestamp)`,
			// Job definitions, written whole at the write timestamp of
			// their revision (jobs.go, rowTimestamp), never by a
			// lightweight transaction.
			`CREATE TABLE IF NOT EXISTS %[1]s.jobs (
				id text PRIMARY KEY,
				spec blob,
				hash blob,
				revision bigint,
				updated_at timestamp,
				deleted boolean,
				next_due timestamp)`,
			// The schedule: one partition per (minute, shard), read whole by
			// the shard's dispatcher; rows in firing order.
			`CREATE TABLE IF NOT EXISTS %[1]s.due_entries (
				bucket timestamp,
				shard int,
				due timestamp,
				job_id text,
				kind text,
				run_id text,
				attempt int,
				revision bigint,
				payload blob,
				PRIMARY KEY ((bucket, shard), due, job_id, kind, run_id))
			WITH CLUSTERING ORDER BY (due ASC, job_id ASC, kind ASC, run_id ASC)`,
			// Per-shard fencing epoch and watermark, written only by
			// lightweight transactions.
			`CREATE TABLE IF NOT EXISTS %[1]s.shards (
				shard int PRIMARY KEY,
				epoch bigint,
				owner text,
				watermark timestamp,
				claimed_at timestamp)`,
			// Run history, one partition per job, newest first; every write
			// carries a TTL (the retention) and the event time as its
			// timestamp.
			`CREATE TABLE IF NOT EXISTS %[1]s.runs (
				job_id text,
				due timestamp,
				run_id text,
				attempt int,
				attempt_due timestamp,
				state text,
				started_at timestamp,
				finished_at timestamp,
				duration_ms bigint,
				error text,
				updated_at timestamp,
				PRIMARY KEY ((job_id), due, run_id, attempt))
			WITH CLUSTERING ORDER BY (due DESC, run_id ASC, attempt DESC)`,
		},
	},
	{
		version:     2,
		description: "trigger idempotency keys",
		statements: []string{
			// The first due time of each (job, idempotency key), written
			// once with IF NOT EXISTS and a TTL (the dedupe retention).
			`CREATE TABLE IF NOT EXISTS %[1]s.trigger_keys (
				job_id text,
				key text,
				due timestamp,
				PRIMARY KEY ((job_id, key)))`,
		},
	},
	{
		version:     3,
		description: "DAG definitions and DAG-run state",
		statements: []string{
			// DAG definitions, written like jobs: only by lightweight
			// transactions on the revision read.
			`CREATE TABLE IF NOT EXISTS %[1]s.dags (
				id text PRIMARY KEY,
				spec blob,
				hash blob,
				revision bigint,
				updated_at timestamp,
				deleted boolean)`,
			// One partition per DAG run, so that Paxos rounds of different
			// runs never contend. Written only by lightweight transactions
			// conditional on version (see dags.go).
			`CREATE TABLE IF NOT EXISTS %[1]s.dag_runs (
				id text PRIMARY KEY,
				dag_id text,
				due timestamp,
				origin text,
				spec blob,
				state blob,
				status text,
				summary text,
				active boolean,
				version bigint,
				created_at timestamp,
				updated_at timestamp)`,
			// The runs of each DAG, newest first, for listings. Plain
			// writes whose write timestamp is the run's version, so an
			// older write never replaces a newer one.
			`CREATE TABLE IF NOT EXISTS %[1]s.dag_runs_by_dag (
				dag_id text,
				due timestamp,
				id text,
				origin text,
				status text,
				summary text,
				active boolean,
				version bigint,
				created_at timestamp,
				updated_at timestamp,
				PRIMARY KEY ((dag_id), due, id))
			WITH CLUSTERING ORDER BY (due DESC, id ASC)`,
			// The ids of active runs, spread over a few partitions; write
			// timestamps are versions here too.
			`CREATE TABLE IF NOT EXISTS %[1]s.dag_runs_active (
				part int,
				id text,
				PRIMARY KEY ((part), id))`,
		},
	},
	{
		version:     4,
		description: "the last log lines of a run's attempt",
		statements: []string{
			`ALTER TABLE %[1]s.runs ADD IF NOT EXISTS log list<text>`,
		},
	},
	{
		version:     5,
		description: "teams and API tokens",
		statements: []string{
			// Teams, written only by lightweight transactions (teams.go).
			`CREATE TABLE IF NOT EXISTS %[1]s.teams (
				name text PRIMARY KEY,
				description text,
				created_at timestamp,
				created_by text)`,
			// API tokens: the SHA-256 of the secret, never the secret.
			// Written only by lightweight transactions; read by id on
			// every authentication the cache misses.
			`CREATE TABLE IF NOT EXISTS %[1]s.tokens (
				id text PRIMARY KEY,
				team text,
				role text,
				cluster_admin boolean,
				secret_hash blob,
				created_at timestamp,
				created_by text,
				revoked_at timestamp,
				expires_at timestamp,
				description text)`,
		},
	},
	{
		version:     6,
		description: "entries held while their job is paused",
		statements: []string{
			// One partition per job: the registry reads a job's held
			// entries whole when it resumes the job.
			`CREATE TABLE IF NOT EXISTS %[1]s.held_entries (
				job_id text,
				due timestamp,
				kind text,
				run_id text,
				attempt int,
				revision bigint,
				payload blob,
				PRIMARY KEY ((job_id), due, kind, run_id))
			WITH CLUSTERING ORDER BY (due ASC, kind ASC, run_id ASC)`,
		},
	},
	{
		version:     7,
		description: "the audit trail by subject and by team",
		statements: []string{
			// Every row is written with a TTL (the trail's retention), so a
			// partition holds one subject's, or one team's, retained
			// records; changes is the JSON list of audit.Change. Records
			// of one millisecond are newest first by id, which sorts in
			// the order of their changes (audit.Record.ID).
			`CREATE TABLE IF NOT EXISTS %[1]s.audit_by_subject (
				subject text,
				at timestamp,
				id text,
				actor text,
				action text,
				team text,
				revision_before bigint,
				revision_after bigint,
				changes text,
				detail text,
				PRIMARY KEY ((subject), at, id))
			WITH CLUSTERING ORDER BY (at DESC, id DESC)`,
			`CREATE TABLE IF NOT EXISTS %[1]s.audit_by_team (
				team text,
				at timestamp,
				id text,
				subject text,
				actor text,
				action text,
				revision_before bigint,
				revision_after bigint,
				changes text,
				detail text,
				PRIMARY KEY ((team), at, id))
			WITH CLUSTERING ORDER BY (at DESC, id DESC)`,
		},
	},
	{
		version:     8,
		description: "team quotas and the per-team job index",
		statements: []string{
			// One row per team with a quota, and the default row (team
			// '*'); 0 in a limit means unlimited. Plain writes: the last
			// operator's write wins.
			`CREATE TABLE IF NOT EXISTS %[1]s.team_quotas (
				team text PRIMARY KEY,
				max_jobs int,
				max_concurrent_runs int,
				updated_at timestamp)`,
			// The jobs of each team, counted by the registry against
			// max_jobs: a set, so a replayed record counts once. Written
			// at the revision of the definition as write timestamp
			// (quotas.go).
			`CREATE TABLE IF NOT EXISTS %[1]s.team_jobs (
				team text,
				job_id text,
				PRIMARY KEY ((team), job_id))`,
			// Which team each job was last indexed under (empty once
			// deleted), and at which revision: how a move between teams
			// finds the old row, and how a replay is told from news.
			`CREATE TABLE IF NOT EXISTS %[1]s.job_teams (
				job_id text PRIMARY KEY,
				team text,
				revision bigint)`,
		},
	},
	{
		version:     9,
		description: "checkpoints and suspended runs",
		statements: []string{
			// The latest checkpoint of each run and, while the run is
			// suspended, the run itself (an encoded sundial.v1.Run) for
			// its resume. Every write is a lightweight transaction fenced
			// by fencing_token (checkpoints.go).
			`CREATE TABLE IF NOT EXISTS %[1]s.checkpoints (
				run_id text PRIMARY KEY,
				seq bigint,
				attempt int,
				fencing_token bigint,
				data blob,
				saved_at timestamp,
				suspended boolean,
				job_id text,
				run blob)`,
		},
	},
	{
		version:     10,
		description: "a per-team bound on runs per minute",
		statements: []string{
			// Null in rows written before: unlimited.
			`ALTER TABLE %[1]s.team_quotas ADD IF NOT EXISTS max_runs_per_minute int`,
		},
	},
	{
		version:     11,
		description: "why a run was late, and a team's runs by time",
		statements: []string{
			`ALTER TABLE %[1]s.runs ADD IF NOT EXISTS owner_team text`,
			`ALTER TABLE %[1]s.runs ADD IF NOT EXISTS wait_reason text`,
			`ALTER TABLE %[1]s.runs ADD IF NOT EXISTS dispatched_at timestamp`,
			`ALTER TABLE %[1]s.runs ADD IF NOT EXISTS received_at timestamp`,
			`ALTER TABLE %[1]s.runs ADD IF NOT EXISTS leased_at timestamp`,
			// The run records of a team, one partition per team and hour
			// of due time (store.RunBucket), newest first: what ListRuns
			// reads across jobs. Written next to the runs row, with its TTL
			// and write timestamp; no log (runs keeps it).
			`CREATE TABLE IF NOT EXISTS %[1]s.runs_by_time (
				owner_team text,
				bucket timestamp,
				due timestamp,
				run_id text,
				attempt int,
				job_id text,
				attempt_due timestamp,
				state text,
				started_at timestamp,
				finished_at timestamp,
				duration_ms bigint,
				error text,
				updated_at timestamp,
				wait_reason text,
				dispatched_at timestamp,
				received_at timestamp,
				leased_at timestamp,
				PRIMARY KEY ((owner_team, bucket), due, run_id, attempt))
			WITH CLUSTERING ORDER BY (due DESC, run_id ASC, attempt DESC)`,
		},
	},
}

// SchemaVersion is the schema version this build needs.
func SchemaVersion() int { return migrations[len(migrations)-1].version }

// MigrateResult says what Migrate did.
type MigrateResult struct {
	// KeyspaceCreated is true when this call created the keyspace.
	KeyspaceCreated bool
	// Applied lists the migration versions this call applied.
	Applied []int
	// Version is the schema version after the call.
	Version int
}

// Migrate creates the keyspace if needed and applies every migration not yet
// recorded in its schema_migrations table. Re-running it is a no-op. It
// fails, naming the field, when the configuration is invalid, when the
// replication factor exceeds the nodes of the cluster (or data centre), or
// when the keyspace exists with another replication.
//
// Run migrations from one process at a time: Cassandra may disagree about
// tables created concurrently by two clients.
func Migrate(ctx context.Context, c Config) (MigrateResult, error) {
	if err := c.Validate(); err != nil {
		return MigrateResult{}, err
	}
	c = c.withDefaults()
	sess, err := connect(ctx, c, c.SchemaTimeout)
	if err != nil {
		return MigrateResult{}, err
	}
	defer sess.Close()
	return migrate(ctx, sess, c)
}

func migrate(ctx context.Context, sess *gocql.Session, c Config) (MigrateResult, error) {
	var res MigrateResult
	created, err := ensureKeyspace(ctx, sess, c)
	if err != nil {
		return res, err
	}
	res.KeyspaceCreated = created
	ks := c.Keyspace
	if err := ddl(ctx, sess, fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s.schema_migrations (
		version int PRIMARY KEY,
		description text,
		applied_at timestamp)`, ks)); err != nil {
		return res, fmt.Errorf("migrate keyspace %s: create schema_migrations: %w", ks, err)
	}
	applied, err := appliedVersions(ctx, sess, c)
	if err != nil {
		return res, err
	}
	for _, m := range migrations {
		if applied[m.version] {
			continue
		}
		for i, stmt := range m.statements {
			if err := ddl(ctx, sess, fmt.Sprintf(stmt, ks)); err != nil {
				return res, fmt.Errorf("migrate keyspace %s: migration %d (%s) statement %d: %w", ks, m.version, m.description, i+1, err)
			}
		}
		err := sess.Query(fmt.Sprintf(`INSERT INTO %s.schema_migrations (version, description, applied_at) VALUES (?, ?, ?)`, ks),
			m.version, m.description, c.Now().UTC()).WithContext(ctx).Exec()
		if err != nil {
			return res, fmt.Errorf("migrate keyspace %s: record migration %d: %w", ks, m.version, err)
		}
		applied[m.version] = true
		res.Applied = append(res.Applied, m.version)
	}
	res.Version = slices.Max(slices.Collect(maps.Keys(applied)))
	return res, nil
}

// ddl runs a schema statement. gocql waits for schema agreement after it.
func ddl(ctx context.Context, sess *gocql.Session, stmt string) error {
	return sess.Query(stmt).WithContext(ctx).Exec()
}

func appliedVersions(ctx context.Context, sess *gocql.Session, c Config) (map[int]bool, error) {
	iter := sess.Query(fmt.Sprintf(`SELECT version FROM %s.schema_migrations`, c.Keyspace)).WithContext(ctx).Iter()
	applied := map[int]bool{}
	var v int
	for iter.Scan(&v) {
		applied[v] = true
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("read schema_migrations of keyspace %s: %w", c.Keyspace, err)
	}
	return applied, nil
}

// ensureKeyspace creates the keyspace, or checks that the existing one has
// the requested replication.
func ensureKeyspace(ctx context.Context, sess *gocql.Session, c Config) (created bool, err error) {
	nodes, err := countNodes(ctx, sess, c.Datacenter)
	if err != nil {
		return false, err
	}
	if c.ReplicationFactor > nodes {
		where := "the cluster has"
		if c.Datacenter != "" {
			where = fmt.Sprintf("data centre %s has", c.Datacenter)
		}
		return false, fmt.Errorf("cassandra config: replication factor: %d, but %s %d node(s): writes at %s would fail", c.ReplicationFactor, where, nodes, c.Consistency)
	}
	want := replication(c)
	have, exists, err := keyspaceReplication(ctx, sess, c.Keyspace)
	if err != nil {
		return false, err
	}
	if exists {
		if !sameReplication(have, want) {
			return false, fmt.Errorf("keyspace %s exists with replication %v, configured %v: change it with ALTER KEYSPACE and run a repair; migrate does not", c.Keyspace, have, want)
		}
		return false, nil
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		parts = append(parts, fmt.Sprintf("'%s': '%s'", k, want[k]))
	}
	stmt := fmt.Sprintf("CREATE KEYSPACE IF NOT EXISTS %s WITH replication = {%s}", c.Keyspace, strings.Join(parts, ", "))
	if err := ddl(ctx, sess, stmt); err != nil {
		return false, fmt.Errorf("create keyspace %s: %w", c.Keyspace, err)
	}
	return true, nil
}

func replication(c Config) map[string]string {
	if c.Datacenter != "" {
		return map[string]string{"class": "org.apache.cassandra.locator.NetworkTopologyStrategy", c.Datacenter: strconv.Itoa(c.ReplicationFactor)}
	}
	return map[string]string{"class": "org.apache.cassandra.locator.SimpleStrategy", "replication_factor": strconv.Itoa(c.ReplicationFactor)}
}

func sameReplication(have, want map[string]string) bool {
	short := func(class string) string { return class[strings.LastIndexByte(class, '.')+1:] }
	if short(have["class"]) != short(want["class"]) {
		return false
	}
	for k, v := range want {
		if k != "class" && have[k] != v {
			return false
		}
	}
	return true
}

func keyspaceReplication(ctx context.Context, sess *gocql.Session, ks string) (map[string]string, bool, error) {
	var repl map[string]string
	err := sess.Query(`SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = ?`, ks).WithContext(ctx).Scan(&repl)
	if errors.Is(err, gocql.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read keyspace %s: %w", ks, err)
	}
	return repl, true, nil
}

// countNodes counts the nodes of the cluster, or of one data centre.
func countNodes(ctx context.Context, sess *gocql.Session, dc string) (int, error) {
	var localDC string
	if err := sess.Query(`SELECT data_center FROM system.local`).WithContext(ctx).Scan(&localDC); err != nil {
		return 0, fmt.Errorf("read system.local: %w", err)
	}
	n := 0
	if dc == "" || dc == localDC {
		n++
	}
	peers, err := peerDataCentres(ctx, sess)
	if err != nil {
		return 0, err
	}
	for _, peerDC := range peers {
		if dc == "" || dc == peerDC {
			n++
		}
	}
	return n, nil
}

// peerDataCentres returns the data centre of every other node of the
// cluster, one entry a node. It reads system.peers_v2 (Cassandra 4 and
// later), which has a row per address and storage port: system.peers has one
// per address, so nodes sharing one (several on a host, as the local cluster
// runs them) would count once. Versions without peers_v2 have only peers.
func peerDataCentres(ctx context.Context, sess *gocql.Session) ([]string, error) {
	dcs, err := readPeerDataCentres(ctx, sess, "system.peers_v2")
	var reqErr gocql.RequestError
	if err != nil && errors.As(err, &reqErr) && reqErr.Code() == gocql.ErrCodeInvalid {
		dcs, err = readPeerDataCentres(ctx, sess, "system.peers")
	}
	return dcs, err
}

func readPeerDataCentres(ctx context.Context, sess *gocql.Session, table string) ([]string, error) {
	iter := sess.Query(`SELECT data_center FROM ` + table).WithContext(ctx).Idempotent(true).Iter()
	var (
		dcs []string
		dc  string
	)
	for iter.Scan(&dc) {
		dcs = append(dcs, dc)
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("read %s: %w", table, err)
	}
	return dcs, nil
}

// checkSchema fails unless the keyspace exists at this build's version.
func checkSchema(ctx context.Context, sess *gocql.Session, c Config) error {
	_, exists, err := keyspaceReplication(ctx, sess, c.Keyspace)
	if err != nil {
		return err
	}
	if !exists {
		return fmt.Errorf("keyspace %s does not exist: run `sundial migrate`", c.Keyspace)
	}
	applied, err := appliedVersions(ctx, sess, c)
	if err != nil {
		return fmt.Errorf("%w (run `sundial migrate`)", err)
	}
	for _, m := range migrations {
		if !applied[m.version] {
			return fmt.Errorf("keyspace %s lacks schema migration %d (%s): run `sundial migrate`", c.Keyspace, m.version, m.description)
		}
	}
	return nil
}
