package dagengine

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the engine's Prometheus metrics. Transition counters are
// counted by the instance whose conditional write applied, so each
// transition counts once across all instances.
type metrics struct {
	dagRuns     *prometheus.CounterVec
	nodes       *prometheus.CounterVec
	active      *prometheus.GaugeVec
	events      *prometheus.CounterVec
	conflicts   prometheus.Counter
	definitions *prometheus.CounterVec
	retries     *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		dagRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sundial", Subsystem: "dagengine", Name: "dag_runs_total",
			Help: "DAG runs that entered a state: running (started or resumed), succeeded, failed, timed_out.",
		}, []string{"state"}),
		nodes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sundial", Subsystem: "dagengine", Name: "nodes_total",
			Help: "DAG nodes that entered a state: running (started), succeeded, failed, cancelled, timed_out, skipped.",
		}, []string{"state"}),
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "sundial", Subsystem: "dagengine", Name: "dag_runs",
			Help: "Unfinished DAG runs by state (running, stuck), as of this instance's last sweep.",
		}, []string{"state"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sundial", Subsystem: "dagengine", Name: "run_events_total",
			Help: "Run events of DAG nodes read from sundial.events, by result: applied, ignored, unknown_dag_run, malformed, failed.",
		}, []string{"result"}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sundial", Subsystem: "dagengine", Name: "version_conflicts_total",
			Help: "Conditional DAG-run writes that lost to another writer and were recomputed.",
		}),
		definitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sundial", Subsystem: "dagengine", Name: "definitions_total",
			Help: "DAG records of sundial.jobs processed, by outcome (created, updated, unchanged, deleted, rejected, stale).",
		}, []string{"outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sundial", Subsystem: "dagengine", Name: "retries_total",
			Help: "Transient store or Kafka errors retried, by operation.",
		}, []string{"op"}),
	}
	for _, c := range []prometheus.Collector{m.dagRuns, m.nodes, m.active, m.events, m.conflicts, m.definitions, m.retries} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("dagengine metrics: %w", err)
		}
	}
	return m, nil
}
