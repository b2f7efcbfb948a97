package runner

import (
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/priority"
)

// Outcomes counted by sundial_runner_runs_total.
const (
	outcomeSucceeded = "succeeded"
	outcomeFailed    = "failed"
	outcomeTimedOut  = "timed_out"
	outcomeRetrying  = "retrying"
	outcomeDead      = "dead"
	outcomeSkipped   = "skipped"
	outcomeCancelled = "cancelled"
	outcomeSuspended = "suspended"
	outcomeDeferred  = "deferred"
	// outcomeDuplicate: the run's dedupe mark existed; nothing executed.
	outcomeDuplicate = "duplicate"
	// outcomeMalformed: the record could not be decoded; it is skipped.
	outcomeMalformed = "malformed"
	// outcomeAborted: a delivery ended before the run's outcome was
	// durable (the runner stopped, the lease stopped being trusted before
	// the run started, an event was not acknowledged); the record is tried
	// again, or redelivered to the partition's next owner.
	outcomeAborted = "aborted"
)

// outcomes lists every outcome label, so that each series exists (at 0)
// from the start and dashboards show 0 rather than no data.
var outcomes = []string{
	outcomeSucceeded, outcomeFailed, outcomeTimedOut, outcomeRetrying, outcomeDead, outcomeSkipped,
	outcomeCancelled, outcomeSuspended, outcomeDeferred, outcomeDuplicate, outcomeMalformed, outcomeAborted,
}

// Results counted by sundial_runner_lease_acquisitions_total.
const (
	leaseAcquired    = "acquired"
	leaseAlreadyDone = "already_done"
	leaseHeld        = "held"
	leaseNoSlot      = "no_slot"
	leaseError       = "error"
)

// leaseResults lists every lease result label (see outcomes).
var leaseResults = []string{leaseAcquired, leaseAlreadyDone, leaseHeld, leaseNoSlot, leaseError}

// priorityLabels are the values of the trigger latency's priority label
// (priorityLabel).
var priorityLabels = []string{"high", "default", "low"}

// metrics are the runner's Prometheus metrics. No label carries a job or run
// id: the series count is bounded by the label values listed here.
type metrics struct {
	triggerLatency *prometheus.HistogramVec
	// teamTriggerLatency is the trigger latency by owning team (teams are
	// few), with the run id as an exemplar: the per-team objective, and the
	// way from a slow bucket to one run of the job behind it.
	teamTriggerLatency *prometheus.HistogramVec
	runs               *prometheus.CounterVec
	retries            prometheus.Counter
	deadLetters        prometheus.Counter
	leases             *prometheus.CounterVec
	leaseLost          prometheus.Counter
	inFlight           prometheus.Gauge
	queued             *prometheus.GaugeVec
	// queuedBy are queued's gauges by priority level (topics.Priorities
	// order), resolved once: they are set on every pop.
	queuedBy     [priority.Levels]prometheus.Gauge
	commitErrors prometheus.Counter
	// teamRuns and teamDeferrals are by owning team (teams are few).
	teamRuns      *prometheus.GaugeVec
	teamDeferrals *prometheus.CounterVec
	// teamRateDeferrals: runs over their team's max_runs_per_minute.
	teamRateDeferrals *prometheus.CounterVec
	// egressRefusals is by owning team and kind (http, kafka, exec).
	egressRefusals *prometheus.CounterVec
	// routed is by routing strategy (routeLabel), and "pool" for the
	// unrouted runs handed over to their job's pool.
	routed *prometheus.CounterVec
	// noWorker is by team: runs deferred because no live executor serves
	// their handler for their team.
	noWorker *prometheus.CounterVec
}

// observeTriggerLatency records one attempt's trigger latency, by priority
// and by team, with the run id as the exemplar of the team's series (the
// job id when the run id does not fit an exemplar's 128 characters).
func (m *metrics) observeTriggerLatency(run *sundialv1.Run, latency time.Duration) {
	seconds := max(latency, 0).Seconds()
	m.triggerLatency.WithLabelValues(priorityLabel(run.GetPriority())).Observe(seconds)
	team := m.teamTriggerLatency.WithLabelValues(run.GetOwnerTeam())
	if ex := runExemplar(run); ex != nil {
		team.(prometheus.ExemplarObserver).ObserveWithExemplar(seconds, ex)
		return
	}
	team.Observe(seconds)
}

// runExemplar is the exemplar of a run: its run id, else its job id, else
// nothing, whichever fits prometheus.ExemplarMaxRunes with its label name
// (an exemplar over it would make ObserveWithExemplar panic).
func runExemplar(run *sundialv1.Run) prometheus.Labels {
	for _, l := range []prometheus.Labels{{"run_id": run.GetRunId()}, {"job_id": run.GetJobId()}} {
		n := 0
		for k, v := range l {
			n += utf8.RuneCountInString(k) + utf8.RuneCountInString(v)
		}
		if n <= prometheus.ExemplarMaxRunes {
			return l
		}
	}
	return nil
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		triggerLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "sundial", Subsystem: "runner", Name: "trigger_latency_seconds",
			Help:    "Time from an attempt's due time to the moment its lease was acquired.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"priority"}),
		teamTriggerLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "sundial", Subsystem: "runner", Name: "team_trigger_latency_seconds",
			Help:    "Time from an attempt's due time to the moment its lease was acquired, by owning team; exemplars carry a run id.",
			Buckets: []float64{.1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"team"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sundial", Subsystem: "runner", Name: "runs_total",
			Help: "Runs handled by outcome.",
		}, []string{"outcome"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sundial", Subsystem: "runner", Name: "retries_total",
			Help: "Retries scheduled as due entries.",
		}),
		deadLetters: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sundial", Subsystem: "runner", Name: "dead_letters_total",
			Help: "Runs written to the dead-letter topic.",
		}),
		leases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sundial", Subsystem: "runner", Name: "lease_acquisitions_total",
			Help: "Lease acquisitions by result: acquired, already_done, held and no_slot (contention), error.",
		}, []string{"result"}),
		leaseLost: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sundial", Subsystem: "runner", Name: "leases_lost_total",
			Help: "Executions whose lease expired or was revoked while they ran.",
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "sundial", Subsystem: "runner", Name: "runs_in_flight",
			Help: "Runs executing now.",
		}),
		queued: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "sundial", Subsystem: "runner", Name: "queued_runs",
			Help: "Fetched runs waiting for a worker, by priority.",
		}, []string{"priority"}),
		commitErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sundial", Subsystem: "runner", Name: "commit_errors_total",
			Help: "Offset commits that failed.",
		}),
		teamRuns: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "sundial", Subsystem: "runner", Name: "team_slots_held",
			Help: "Team slots (max_concurrent_runs) this runner holds, by team.",
		}, []string{"team"}),
		teamDeferrals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sundial", Subsystem: "runner", Name: "team_quota_deferrals_total",
			Help: "Runs deferred because their team had max_concurrent_runs runs executing, by team.",
		}, []string{"team"}),
		teamRateDeferrals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sundial", Subsystem: "runner", Name: "team_rate_deferrals_total",
			Help: "Runs deferred to the next minute because their team had started max_runs_per_minute runs this minute, by team.",
		}, []string{"team"}),
		egressRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sundial", Subsystem: "runner", Name: "egress_refusals_total",
			Help: "Attempts the egress policy refused (an address, a Kafka topic or a command the team may not reach), by team and kind.",
		}, []string{"team", "kind"}),
		routed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sundial", Subsystem: "runner", Name: "routed_runs_total",
			Help: "Runs this runner chose an executor for, by routing strategy (\"pool\": an unrouted run handed over to its job's pool).",
		}, []string{"strategy"}),
		noWorker: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sundial", Subsystem: "runner", Name: "no_worker_deferrals_total",
			Help: "Handler runs deferred because no live executor serves their handler for their team (reason no_worker), by team.",
		}, []string{"team"}),
	}
	// Every labelled series exists from the start, at 0.
	for _, o := range outcomes {
		m.runs.WithLabelValues(o)
	}
	for _, l := range leaseResults {
		m.leases.WithLabelValues(l)
	}
	for _, p := range priorityLabels {
		m.triggerLatency.WithLabelValues(p)
	}
	for i, p := range topics.Priorities() {
		m.queuedBy[i] = m.queued.WithLabelValues(string(p))
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.triggerLatency, m.teamTriggerLatency, m.runs, m.retries, m.deadLetters, m.leases, m.leaseLost, m.inFlight, m.queued, m.commitErrors, m.teamRuns, m.teamDeferrals, m.teamRateDeferrals, m.egressRefusals, m.routed, m.noWorker} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("runner: register metrics: %w", err)
		}
	}
	return m, nil
}
