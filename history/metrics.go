package history

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sundialhq/sundial/internal/telemetry"
)

// Label values of sundial_history_events_total{result}.
const (
	eventDecoded   = "decoded"
	eventMalformed = "malformed"
)

// Label values of sundial_history_records_total{result}.
const (
	// resultStored: written to the store.
	resultStored = "stored"
	// resultRefused: the store refused the record as invalid; it is dropped.
	resultRefused = "refused"
	// resultInvalid: the event maps to a record that fails validation; it
	// is dropped without a write.
	resultInvalid = "invalid"
)

// metrics of a Writer:
//
//	sundial_history_events_total{result}      run events read: decoded, malformed
//	sundial_history_records_total{result}     history records: stored, refused, invalid
//	sundial_history_coalesced_total           records folded into a later state of their attempt in the same gather
//	sundial_history_batches_total             gathers' records written together (RecordRuns calls that succeeded)
//	sundial_history_retries_total             failed store writes tried again
//	sundial_history_lag_seconds               event time to its record stored (histogram)
//	sundial_history_consumer_lag_records      events on the owned partitions not yet stored (gauge)
//	sundial_history_consumer_lag_seconds      age of the oldest event not yet stored (gauge)
type metrics struct {
	events    *prometheus.CounterVec
	records   *prometheus.CounterVec
	coalesced prometheus.Counter
	batches   prometheus.Counter
	retries   prometheus.Counter
	latency   prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer, l *lag, now func() time.Time) (*metrics, error) {
	m := &metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sundial_history_events_total",
			Help: "Run events read from sundial.events by the history writer, by result (decoded, malformed: skipped).",
		}, []string{"result"}),
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sundial_history_records_total",
			Help: "Run history records, by result (stored; refused by the store as invalid, or invalid before the write: dropped).",
		}, []string{"result"}),
		coalesced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sundial_history_coalesced_total",
			Help: "History records not written because a later state of the same attempt came in the same gather of events.",
		}),
		batches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sundial_history_batches_total",
			Help: "Polls whose history records were written together (one store call each).",
		}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sundial_history_retries_total",
			Help: "History writes that failed and were tried again.",
		}),
		latency: prometheus.NewHistogram(telemetry.HistogramOpts("sundial_history_lag_seconds",
			"Time from a run event (its time) to its history record stored: how far 'sundial runs list' is behind.", nil)),
	}
	lagRecords := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sundial_history_consumer_lag_records",
		Help: "Run events on the history writer's partitions of sundial.events not yet stored, as of its last fetch.",
	}, func() float64 { return float64(l.records()) })
	lagSeconds := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sundial_history_consumer_lag_seconds",
		Help: "Age of the oldest run event on the history writer's partitions not yet stored (an upper bound for events not fetched yet); 0 when caught up.",
	}, func() float64 { return l.seconds(now()) })
	cs := []prometheus.Collector{m.events, m.records, m.coalesced, m.batches, m.retries, m.latency, lagRecords, lagSeconds}
	var errs []error
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		for _, c := range cs {
			reg.Unregister(c)
		}
		return nil, fmt.Errorf("history: register metrics: %w", err)
	}
	// Every result is exported from the start, so a rate over it is 0, not
	// absent, until something happens.
	for _, r := range []string{eventDecoded, eventMalformed} {
		m.events.WithLabelValues(r)
	}
	for _, r := range []string{resultStored, resultRefused, resultInvalid} {
		m.records.WithLabelValues(r)
	}
	return m, nil
}
