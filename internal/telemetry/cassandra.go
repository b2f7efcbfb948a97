package telemetry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/gocql/gocql"
	"github.com/prometheus/client_golang/prometheus"
)

// CassandraObserver records the latency of every Cassandra statement and
// batch a gocql session executes. Set it as both the QueryObserver and the
// BatchObserver of the gocql.ClusterConfig. Metrics:
//
//	sundial_cassandra_request_duration_seconds{op, table, outcome}  histogram
//	sundial_cassandra_request_retries_total{op, table}             counter
//
// One observation per attempt and per page. op is select, insert, update,
// delete, batch or schema, with the suffix _lwt for lightweight transactions
// (IF ...), which cost a Paxos round and are worth telling apart; table is
// the table without its keyspace (keyspaces differ per test, tables do not);
// outcome is ok, timeout, unavailable or error.
type CassandraObserver struct {
	duration *prometheus.HistogramVec
	retries  *prometheus.CounterVec
	kinds    stmtKinds
}

// stmtKinds caches the classification of each statement text; the store's
// statements are a fixed set, so it stays small. The zero value is ready.
type stmtKinds struct{ m sync.Map } // string -> stmtKind

var (
	_ gocql.QueryObserver = (*CassandraObserver)(nil)
	_ gocql.BatchObserver = (*CassandraObserver)(nil)
)

// NewCassandraObserver returns an observer whose metrics are registered on reg.
func NewCassandraObserver(reg prometheus.Registerer) (*CassandraObserver, error) {
	o := &CassandraObserver{
		duration: prometheus.NewHistogramVec(HistogramOpts("sundial_cassandra_request_duration_seconds",
			"Time of one attempt of one Cassandra statement or batch (one page for reads), by kind of statement, table and outcome.",
			CallBuckets()), []string{"op", "table", "outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sundial_cassandra_request_retries_total",
			Help: "Attempts of Cassandra statements and batches beyond the first (driver retries), by kind of statement and table.",
		}, []string{"op", "table"}),
	}
	var errs []error
	for _, c := range []prometheus.Collector{o.duration, o.retries} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		reg.Unregister(o.duration)
		reg.Unregister(o.retries)
		return nil, fmt.Errorf("telemetry: cassandra observer: register metrics: %w", err)
	}
	return o, nil
}

// Instrument sets the observer on a cluster configuration.
func (o *CassandraObserver) Instrument(cluster *gocql.ClusterConfig) {
	cluster.QueryObserver = o
	cluster.BatchObserver = o
}

// ObserveQuery implements gocql.QueryObserver.
func (o *CassandraObserver) ObserveQuery(_ context.Context, q gocql.ObservedQuery) {
	k := o.kind(q.Statement)
	o.observe(k.op, k.table, q.End.Sub(q.Start).Seconds(), q.Err, q.Attempt)
}

// ObserveBatch implements gocql.BatchObserver. A batch is labelled by the
// table of its first statement (the store's batches are single-partition).
func (o *CassandraObserver) ObserveBatch(_ context.Context, b gocql.ObservedBatch) {
	op, table := "batch", ""
	if len(b.Statements) > 0 {
		k := o.kind(b.Statements[0])
		table = k.table
		if strings.HasSuffix(k.op, "_lwt") {
			op = "batch_lwt"
		}
	}
	o.observe(op, table, b.End.Sub(b.Start).Seconds(), b.Err, b.Attempt)
}

func (o *CassandraObserver) observe(op, table string, seconds float64, err error, attempt int) {
	o.duration.WithLabelValues(op, table, cassandraOutcome(err)).Observe(seconds)
	if attempt > 0 {
		o.retries.WithLabelValues(op, table).Inc()
	}
}

func (o *CassandraObserver) kind(stmt string) stmtKind { return o.kinds.kind(stmt) }

func (s *stmtKinds) kind(stmt string) stmtKind {
	if k, ok := s.m.Load(stmt); ok {
		return k.(stmtKind)
	}
	k := classify(stmt)
	s.m.Store(stmt, k)
	return k
}

// cassandraOutcome classifies err into a bounded set of label values.
func cassandraOutcome(err error) string {
	var timeout *gocql.RequestErrWriteTimeout
	var readTimeout *gocql.RequestErrReadTimeout
	var unavailable *gocql.RequestErrUnavailable
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &timeout), errors.As(err, &readTimeout),
		errors.Is(err, gocql.ErrTimeoutNoResponse), errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &unavailable), errors.Is(err, gocql.ErrNoConnections):
		return "unavailable"
	default:
		return "error"
	}
}

type stmtKind struct{ op, table string }

// classify reads the kind of a CQL statement and the table it touches.
func classify(stmt string) stmtKind {
	f := strings.Fields(strings.ToLower(stmt))
	if len(f) == 0 {
		return stmtKind{op: "other"}
	}
	after := func(word string) string {
		for i, w := range f {
			if w == word && i+1 < len(f) {
				return tableName(f[i+1])
			}
		}
		return ""
	}
	lwt := func(op string) string {
		for _, w := range f {
			if w == "if" {
				return op + "_lwt"
			}
		}
		return op
	}
	switch f[0] {
	case "select":
		return stmtKind{op: "select", table: after("from")}
	case "insert":
		return stmtKind{op: lwt("insert"), table: after("into")}
	case "update":
		if len(f) > 1 {
			return stmtKind{op: lwt("update"), table: tableName(f[1])}
		}
	case "delete":
		return stmtKind{op: lwt("delete"), table: after("from")}
	case "create", "alter", "drop", "truncate":
		return stmtKind{op: "schema"}
	}
	return stmtKind{op: "other"}
}

// tableName drops the keyspace, quotes and anything glued to the name.
func tableName(s string) string {
	if i := strings.IndexAny(s, "(;"); i >= 0 {
		s = s[:i]
	}
	if i := strings.LastIndexByte(s, '.'); i >= 0 {
		s = s[i+1:]
	}
	return strings.Trim(s, `"`)
}
