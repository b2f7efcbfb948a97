package history

import (
	"errors"
	"fmt"

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
//	sundial_history_events_total{result}   run events read: decoded, malformed
//	sundial_history_records_total{result}  history records: stored, refused, invalid
//	sundial_history_retries_total          failed store writes tried again
//	sundial_history_lag_seconds            event time to its record stored
type metrics struct {
	events  *prometheus.CounterVec
	records *prometheus.CounterVec
	retries prometheus.Counter
	lag     prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sundial_history_events_total",
			Help: "Run events read from sundial.events by the history writer, by result (decoded, malformed: skipped).",
		}, []string{"result"}),
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sundial_history_records_total",
			Help: "Run history records, by result (stored; refused by the store as invalid, or invalid before the write: dropped).",
		}, []string{"result"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sundial_history_retries_total",
			Help: "History writes that failed and were tried again.",
		}),
		lag: prometheus.NewHistogram(telemetry.HistogramOpts("sundial_history_lag_seconds",
			"Time from a run event (its time) to its history record stored: how far 'sundial runs list' is behind.", nil)),
	}
	cs := []prometheus.Collector{m.events, m.records, m.retries, m.lag}
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
