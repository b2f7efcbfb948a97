package registry

import (
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

type metrics struct {
	records    *prometheus.CounterVec
	rejections *prometheus.CounterVec
	retries    *prometheus.CounterVec
	// quotaRejections counts definitions refused by a team quota.
	quotaRejections *prometheus.CounterVec
	latency         prometheus.Histogram
	lag             prometheus.Histogram
	// ownershipEnforced is 1 when only team topics are read.
	ownershipEnforced prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sundial", Subsystem: "registry", Name: "records_total",
			Help: "Records of sundial.jobs processed, by outcome (created, updated, unchanged, deleted, rejected, stale, dag_skipped).",
		}, []string{"outcome"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sundial", Subsystem: "registry", Name: "rejections_total",
			Help: "Rejected definitions by the field at fault (list indexes and map keys dropped); a definition counts once per field.",
		}, []string{"field"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sundial", Subsystem: "registry", Name: "retries_total",
			Help: "Transient store or Kafka errors retried, by operation.",
		}, []string{"op"}),
		quotaRejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sundial", Subsystem: "registry", Name: "quota_rejections_total",
			Help: "Definitions rejected because they would create a job beyond the team's quota, by quota (max_jobs).",
		}, []string{"quota"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "sundial", Subsystem: "registry", Name: "processing_seconds",
			Help:    "Time to decode, validate and apply one record (store writes and wake-up included).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "sundial", Subsystem: "registry", Name: "lag_seconds",
			Help:    "Time from a record's timestamp to the end of its processing.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 20),
		}),
		ownershipEnforced: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "sundial", Subsystem: "registry", Name: "ownership_enforced",
			Help: "1 when the registry reads only the team topics sundial.jobs.<team>, whose writers Kafka ACLs decide; 0 while it also reads the shared sundial.jobs.",
		}),
	}
	for _, c := range []prometheus.Collector{m.records, m.rejections, m.retries, m.quotaRejections, m.latency, m.lag, m.ownershipEnforced} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registry metrics: %w", err)
		}
	}
	return m, nil
}

func outcomeLabel(o sundialv1.DefinitionOutcome) string {
	return strings.ToLower(strings.TrimPrefix(o.String(), "DEFINITION_OUTCOME_"))
}

// metricField maps a field path to a bounded metric label: list indexes and
// map keys are dropped ("labels[\"env\"]" -> "labels"). Every path with a
// bracket ends with it, so cutting at the first one loses nothing else.
func metricField(field string) string {
	if i := strings.IndexByte(field, '['); i >= 0 {
		return field[:i]
	}
	return field
}
