package telemetry_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/internal/telemetry"
	"github.com/sundialhq/sundial/internal/testenv"
)

func TestCassandraObserverLabels(t *testing.T) {
	t.Parallel()
	tests := []struct {
		stmt      string
		err       error
		op, table string
		outcome   string
	}{
		{`SELECT job_id, due FROM ks_1.due_entries WHERE bucket = ? AND shard = ?`, nil, "select", "due_entries", "ok"},
		{`select * from "Jobs"`, nil, "select", "jobs", "ok"},
		{`INSERT INTO ks.jobs (id, spec) VALUES (?, ?) IF NOT EXISTS`, nil, "insert_lwt", "jobs", "ok"},
		{`INSERT INTO ks.runs(id) VALUES (?)`, &gocql.RequestErrWriteTimeout{}, "insert", "runs", "timeout"},
		{`UPDATE ks.shards SET epoch = ? WHERE shard = ? IF epoch = ?`, nil, "update_lwt", "shards", "ok"},
		{`  DELETE FROM ks.due_entries WHERE bucket = ?`, &gocql.RequestErrUnavailable{}, "delete", "due_entries", "unavailable"},
		{`CREATE TABLE IF NOT EXISTS ks.t (a int PRIMARY KEY)`, errors.New("syntax"), "schema", "", "error"},
		{`USE ks`, context.DeadlineExceeded, "other", "", "timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.stmt, func(t *testing.T) {
			t.Parallel()
			reg := prometheus.NewRegistry()
			o, err := telemetry.NewCassandraObserver(reg)
			require.NoError(t, err)
			start := time.Unix(100, 0)
			o.ObserveQuery(t.Context(), gocql.ObservedQuery{Statement: tt.stmt, Start: start, End: start.Add(3 * time.Millisecond), Err: tt.err})
			o.ObserveQuery(t.Context(), gocql.ObservedQuery{Statement: tt.stmt, Start: start, End: start.Add(time.Millisecond), Err: tt.err, Attempt: 1})
			want := map[string]string{"op": tt.op, "table": tt.table, "outcome": tt.outcome}
			s := series(t, reg, "sundial_cassandra_request_duration_seconds", want)
			require.Len(t, s, 1, "labels %v", want)
			assert.EqualValues(t, 2, s[0].GetHistogram().GetSampleCount())
			assert.InDelta(t, 0.004, s[0].GetHistogram().GetSampleSum(), 1e-9)
			r := series(t, reg, "sundial_cassandra_request_retries_total", map[string]string{"op": tt.op, "table": tt.table})
			require.Len(t, r, 1)
			assert.EqualValues(t, 1, r[0].GetCounter().GetValue())
		})
	}
}

func TestCassandraObserverBatch(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	o, err := telemetry.NewCassandraObserver(reg)
	require.NoError(t, err)
	now := time.Now()
	o.ObserveBatch(t.Context(), gocql.ObservedBatch{Statements: []string{"INSERT INTO k.due_entries (a) VALUES (?)", "INSERT INTO k.due_entries (a) VALUES (?)"}, Start: now, End: now})
	o.ObserveBatch(t.Context(), gocql.ObservedBatch{Statements: []string{"UPDATE k.jobs SET a = ? WHERE id = ? IF a = ?"}, Start: now, End: now})
	assert.EqualValues(t, 1, histogramCount(t, reg, "sundial_cassandra_request_duration_seconds", map[string]string{"op": "batch", "table": "due_entries"}))
	assert.EqualValues(t, 1, histogramCount(t, reg, "sundial_cassandra_request_duration_seconds", map[string]string{"op": "batch_lwt", "table": "jobs"}))

	_, err = telemetry.NewCassandraObserver(reg)
	assert.Error(t, err, "a second observer on one registry")
}

// On a real Cassandra, every statement of an instrumented session is
// recorded, and CassandraCheck passes; it fails on a closed session.
func TestCassandraObserverOnRealCluster(t *testing.T) {
	t.Parallel()
	c := testenv.NeedCassandra(t)
	reg := prometheus.NewRegistry()
	o, err := telemetry.NewCassandraObserver(reg)
	require.NoError(t, err)
	cluster := gocql.NewCluster(c.Hosts...)
	// Schema changes on a single busy test node can take several seconds.
	cluster.Timeout = time.Minute
	o.Instrument(cluster)
	session, err := cluster.CreateSession()
	require.NoError(t, err)

	require.NoError(t, telemetry.CassandraCheck(session)(t.Context()))
	require.NoError(t, session.Query(fmt.Sprintf(`CREATE KEYSPACE %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`, c.Keyspace)).WithContext(t.Context()).Exec())
	require.NoError(t, session.Query(fmt.Sprintf(`CREATE TABLE %s.probe (id text PRIMARY KEY, v int)`, c.Keyspace)).WithContext(t.Context()).Exec())
	require.NoError(t, session.Query(fmt.Sprintf(`INSERT INTO %s.probe (id, v) VALUES (?, ?) IF NOT EXISTS`, c.Keyspace), "a", 1).WithContext(t.Context()).Exec())
	b := session.NewBatch(gocql.UnloggedBatch).WithContext(t.Context())
	b.Query(fmt.Sprintf(`INSERT INTO %s.probe (id, v) VALUES (?, ?)`, c.Keyspace), "b", 2)
	require.NoError(t, session.ExecuteBatch(b))

	const name = "sundial_cassandra_request_duration_seconds"
	assert.EqualValues(t, 1, histogramCount(t, reg, name, map[string]string{"op": "select", "table": "local", "outcome": "ok"}))
	assert.EqualValues(t, 1, histogramCount(t, reg, name, map[string]string{"op": "insert_lwt", "table": "probe", "outcome": "ok"}))
	assert.EqualValues(t, 1, histogramCount(t, reg, name, map[string]string{"op": "batch", "table": "probe", "outcome": "ok"}))
	assert.EqualValues(t, 2, histogramCount(t, reg, name, map[string]string{"op": "schema", "outcome": "ok"}))

	session.Close()
	assert.ErrorContains(t, telemetry.CassandraCheck(session)(t.Context()), "cassandra: ")
}
