package gateway

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes counted by sundial_gateway_completes_total.
const (
	completeSuccess = "success"
	completeFailure = "failure"
	completeSuspend = "suspend"
	// completeStale: the outcome came after the attempt had ended (lost,
	// cancelled, timed out); it is ignored.
	completeStale = "stale"
)

var completeOutcomes = []string{completeSuccess, completeFailure, completeSuspend, completeStale}

// Results of a Poll, the label of sundial_gateway_poll_wait_seconds.
const (
	pollTasks = "tasks"
	pollEmpty = "empty"
)

// waitBuckets cover a Poll's wait up to MaxWait's default, and a task's
// wait in its queue from a millisecond (a worker was polling) to minutes
// (none was free).
var waitBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20, 60, 300}

// metrics are the Broker's: what its queues and its workers look like. The
// team label is bounded by the installation's teams.
type metrics struct {
	pollWait  *prometheus.HistogramVec
	queueWait prometheus.Histogram
	completes *prometheus.CounterVec
	lost      *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, b *Broker) (*metrics, error) {
	m := &metrics{
		pollWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "sundial", Subsystem: "gateway", Name: "poll_wait_seconds",
			Help:    "How long a worker's Poll waited before it was answered, by result (tasks: it took some; empty: its wait ended first).",
			Buckets: waitBuckets,
		}, []string{"result"}),
		queueWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "sundial", Subsystem: "gateway", Name: "task_queue_seconds",
			Help:    "How long an attempt waited in the gateway's queue before a worker of its team took it.",
			Buckets: waitBuckets,
		}),
		completes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sundial", Subsystem: "gateway", Name: "completes_total",
			Help: "Outcomes workers gave back, by outcome (success, failure, suspend; stale: after the attempt had ended, ignored).",
		}, []string{"outcome"}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sundial", Subsystem: "gateway", Name: "workers_lost_total",
			Help: "Attempts failed as worker_lost (retried): their worker stopped heartbeating, or no live worker of the team served the handler any more, by team.",
		}, []string{"team"}),
	}
	for _, o := range completeOutcomes {
		m.completes.WithLabelValues(o)
	}
	for _, r := range []string{pollTasks, pollEmpty} {
		m.pollWait.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.pollWait, m.queueWait, m.completes, m.lost, stateCollector{b}} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("gateway: register metrics: %w", err)
		}
	}
	return m, nil
}

var (
	workersDesc = prometheus.NewDesc("sundial_gateway_workers",
		"Workers connected to this gateway (polling, or heard from within the lost-worker bound), by team.", []string{"team"}, nil)
	tasksDesc = prometheus.NewDesc("sundial_gateway_tasks",
		"Attempts this gateway holds, by team and state (queued: waiting for a worker; held: taken by a worker, in flight).", []string{"team", "state"}, nil)
)

// stateCollector reads the Broker's workers and tasks when scraped.
type stateCollector struct{ b *Broker }

func (stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- workersDesc
	ch <- tasksDesc
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.b.state()
	for team, n := range s.workers {
		ch <- prometheus.MustNewConstMetric(workersDesc, prometheus.GaugeValue, float64(n), team)
	}
	for team, n := range s.queued {
		ch <- prometheus.MustNewConstMetric(tasksDesc, prometheus.GaugeValue, float64(n), team, "queued")
	}
	for team, n := range s.held {
		ch <- prometheus.MustNewConstMetric(tasksDesc, prometheus.GaugeValue, float64(n), team, "held")
	}
}

// brokerState is what the Broker holds now, per team.
type brokerState struct {
	workers, queued, held map[string]int
}

// state counts the live workers and the attempts queued and held, per
// team.
func (b *Broker) state() brokerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := brokerState{workers: map[string]int{}, queued: map[string]int{}, held: map[string]int{}}
	now := b.cfg.Now()
	for k, w := range b.workers {
		if b.live(w, now) {
			s.workers[k.team]++
		}
	}
	for k, q := range b.queues {
		s.queued[k.team] += len(q)
	}
	for _, t := range b.tasks {
		if t.taken && !t.ended {
			s.held[t.Team]++
		}
	}
	return s
}
