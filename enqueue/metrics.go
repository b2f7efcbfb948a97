package enqueue

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sundialhq/sundial/internal/telemetry"
	"github.com/sundialhq/sundial/store"
)

// Label values of sundial_enqueue_duration_seconds.
const (
	opEnqueue = "enqueue" // Enqueue: store write, then wake-ups
	opWake    = "wake"    // Wake alone (entries the caller stored)

	outcomeOK         = "ok"
	outcomeInvalid    = "invalid"     // refused before any write
	outcomeStoreError = "store_error" // the store write failed; nothing was woken
	outcomeWakeError  = "wake_error"  // a wake-up was not acknowledged
)

// Label values of sundial_enqueue_wakeups_total{result}.
const (
	wakeProduced = "produced" // acknowledged by Kafka
	wakeSkipped  = "skipped"  // due beyond the wake horizon: the bucket read finds it
	wakeFailed   = "failed"   // not acknowledged; the caller retries the call
)

// metrics of an Enqueuer:
//
//	sundial_enqueue_entries_total{kind}             entries stored (store.PutDue acknowledged)
//	sundial_enqueue_wakeups_total{result}           wake-ups: produced, skipped, failed
//	sundial_enqueue_duration_seconds{op, outcome}   one Enqueue or Wake call
//
// kind is the entry's kind (scheduled, retry, trigger, dag): who schedules.
type metrics struct {
	entries  *prometheus.CounterVec
	wakeups  *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		entries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sundial_enqueue_entries_total",
			Help: "Due entries written to the schedule store by Enqueue, by kind (scheduled, retry, trigger, dag).",
		}, []string{"kind"}),
		wakeups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sundial_enqueue_wakeups_total",
			Help: "Wake-ups for shard owners on sundial.shards, by result (produced; skipped: due beyond the wake horizon; failed: not acknowledged).",
		}, []string{"result"}),
		duration: prometheus.NewHistogramVec(telemetry.HistogramOpts("sundial_enqueue_duration_seconds",
			"Time of one Enqueue (store write and wake-ups) or Wake call, by op and outcome (ok, invalid, store_error, wake_error).",
			telemetry.CallBuckets()), []string{"op", "outcome"}),
	}
	cs := []prometheus.Collector{m.entries, m.wakeups, m.duration}
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
		return nil, fmt.Errorf("enqueue: register metrics: %w", err)
	}
	// Export the fixed label values from the start, so rates over them
	// are 0 rather than absent until something happens.
	for _, k := range []store.Kind{store.KindScheduled, store.KindRetry, store.KindTrigger, store.KindDAG} {
		m.entries.WithLabelValues(string(k))
	}
	for _, r := range []string{wakeProduced, wakeSkipped, wakeFailed} {
		m.wakeups.WithLabelValues(r)
	}
	return m, nil
}
