package telemetry_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/gocql/gocql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/internal/telemetry"
)

// recordingObserver remembers the statements passed on to it.
type recordingObserver struct{ queries, batches int }

func (o *recordingObserver) ObserveQuery(context.Context, gocql.ObservedQuery) { o.queries++ }
func (o *recordingObserver) ObserveBatch(context.Context, gocql.ObservedBatch) { o.batches++ }

func TestWorkCounterCountsCassandraByKind(t *testing.T) {
	t.Parallel()
	next := &recordingObserver{}
	c := (&telemetry.WorkCounter{}).Then(next, next)
	ctx := t.Context()
	c.ObserveQuery(ctx, gocql.ObservedQuery{Statement: "SELECT * FROM ks.jobs WHERE id = ?"})
	c.ObserveQuery(ctx, gocql.ObservedQuery{Statement: "SELECT * FROM ks.jobs WHERE id = ?", Attempt: 1})
	c.ObserveQuery(ctx, gocql.ObservedQuery{Statement: "INSERT INTO ks.due_entries (a) VALUES (?)"})
	c.ObserveQuery(ctx, gocql.ObservedQuery{Statement: "UPDATE ks.shards SET watermark = ? WHERE shard = ? IF epoch = ?"})
	c.ObserveBatch(ctx, gocql.ObservedBatch{Statements: []string{"INSERT INTO ks.runs (a) VALUES (?)", "INSERT INTO ks.runs_by_time (a) VALUES (?)"}})
	c.ObserveBatch(ctx, gocql.ObservedBatch{Statements: []string{"INSERT INTO ks.dag_runs (a) VALUES (?) IF NOT EXISTS"}})
	assert.Equal(t, telemetry.Work{CassandraReads: 2, CassandraWrites: 1, CassandraLWT: 2, CassandraBatches: 1, CassandraBatchRows: 3}, c.Work())
	assert.Equal(t, 4, next.queries, "passed on")
	assert.Equal(t, 2, next.batches, "passed on")
}

func TestWorkCounterCountsRedisRoundTrips(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	// One connection, so that no handshake of a second one is counted.
	client := redis.NewClient(&redis.Options{Addr: mr.Addr(), PoolSize: 1})
	t.Cleanup(func() { _ = client.Close() })
	c := &telemetry.WorkCounter{}
	client.AddHook(c.RedisHook())
	ctx := t.Context()
	// The connection's own handshake (HELLO, CLIENT SETINFO) goes through
	// the hook too: count from after it.
	require.NoError(t, client.Ping(ctx).Err())
	before := c.Work()
	require.NoError(t, client.Set(ctx, "k", "v", 0).Err())
	assert.Equal(t, telemetry.Work{RedisRoundTrips: 1, RedisCommands: 1}, c.Work().Sub(before))
	before = c.Work()
	_, err := client.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, "a")
		p.Incr(ctx, "b")
		p.Incr(ctx, "c")
		return nil
	})
	require.NoError(t, err)
	// One round trip of three commands; miniredis may also make the
	// client dial again (a handshake of its own).
	d := c.Work().Sub(before)
	assert.Equal(t, 2*(d.RedisCommands-3), 3*(d.RedisRoundTrips-1), "the pipeline, and handshakes of two round trips with three commands: %+v", d)
}

func TestWorkCounterExportsAndReadsBack(t *testing.T) {
	t.Parallel()
	c := &telemetry.WorkCounter{}
	c.ObserveQuery(t.Context(), gocql.ObservedQuery{Statement: "DELETE FROM ks.due_entries WHERE bucket = ?", Start: time.Now()})
	reg := prometheus.NewRegistry()
	require.NoError(t, c.Register(reg))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var series []telemetry.WorkSeries
	for _, mf := range mfs {
		require.Equal(t, telemetry.WorkMetricName, mf.GetName())
		for _, m := range mf.GetMetric() {
			s := telemetry.WorkSeries{Value: m.GetCounter().GetValue()}
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "backend":
					s.Backend = l.GetValue()
				case "kind":
					s.Kind = l.GetValue()
				}
			}
			series = append(series, s)
		}
	}
	got, err := telemetry.WorkFromSeries(series)
	require.NoError(t, err)
	assert.Equal(t, c.Work(), got)
	_, err = telemetry.WorkFromSeries([]telemetry.WorkSeries{{Backend: "kafka", Kind: "nope"}})
	assert.ErrorContains(t, err, `kind="nope"`)
}

func TestWorkSubAddPer(t *testing.T) {
	t.Parallel()
	a := telemetry.Work{KafkaRecords: 10, CassandraWrites: 4, CassandraBatches: 2, CassandraLWT: 1, CassandraReads: 3}
	b := telemetry.Work{KafkaRecords: 4, CassandraWrites: 1}
	assert.Equal(t, telemetry.Work{KafkaRecords: 6, CassandraWrites: 3, CassandraBatches: 2, CassandraLWT: 1, CassandraReads: 3}, a.Sub(b))
	assert.Equal(t, a, a.Sub(b).Add(b))
	assert.Equal(t, int64(10), a.CassandraRequests())
	p := a.Per(2)
	assert.InDelta(t, 5.0, p.KafkaRecords, 1e-9)
	assert.InDelta(t, 5.0, p.CassandraRequests, 1e-9)
	assert.Equal(t, telemetry.WorkPerRun{}, a.Per(0))
}
