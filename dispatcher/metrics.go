package dispatcher

import (
	"errors"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sundialhq/sundial/internal/telemetry"
)

// metrics of a dispatcher. Labels are bounded sets: the shard number (at
// most S values), the run origin, the owning team (teams are few) and the
// reason an entry was dropped. No metric is labelled by job.
type metrics struct {
	dispatchLatency *prometheus.HistogramVec
	runs            *prometheus.CounterVec
	// teamRuns is runs by owning team: the demand side of a team's
	// trigger-latency objective (deploy/prometheus/rules/sundial-slo.yml).
	teamRuns     *prometheus.CounterVec
	dropped      *prometheus.CounterVec
	fireErrors   prometheus.Counter
	deadLettered *prometheus.CounterVec
	// enqueuedEventErrors counts failed writes of ENQUEUED events.
	enqueuedEventErrors prometheus.Counter
	firePhase           *prometheus.HistogramVec
	shardsOwned         prometheus.Gauge
	claims              *prometheus.CounterVec
	lag                 *prometheus.GaugeVec
	watermarkAge        *prometheus.GaugeVec
	entries             *prometheus.GaugeVec
	bucketLoad          prometheus.Histogram
	bucketSize          prometheus.Histogram
	wakeups             *prometheus.CounterVec
	jobCache            *prometheus.CounterVec
	jobsCached          prometheus.Gauge
	jobFeedLag          prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		dispatchLatency: prometheus.NewHistogramVec(telemetry.HistogramOpts("sundial_dispatcher_dispatch_latency_seconds",
			"Time from a run's due time (its attempt's) to Kafka's acknowledgement of the run record, by origin.",
			telemetry.LatencyBuckets()), []string{"origin"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sundial_dispatcher_runs_total",
			Help: "Run records written to sundial.runs.*, by origin.",
		}, []string{"origin"}),
		teamRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sundial_dispatcher_team_runs_total",
			Help: "Run records written to sundial.runs.*, by owning team.",
		}, []string{"team"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sundial_dispatcher_entries_dropped_total",
			Help: "Due entries that fired no run, by reason (dead: the job changed or was deleted, or a scheduled entry's job is paused; misfire: skipped by the misfire policy or outside the catch-up window; invalid: the stored job or entry cannot be used).",
		}, []string{"reason"}),
		firePhase: prometheus.NewHistogramVec(telemetry.HistogramOpts("sundial_dispatcher_fire_phase_seconds",
			"Duration of the phases of a firing: plan (job from memory or read, liveness check, runs built; done ahead of the due time), produce (from the firing time to Kafka's acknowledgement), chain (storing the next occurrence).",
			telemetry.CallBuckets()), []string{"phase"}),
		fireErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sundial_dispatcher_fire_errors_total",
			Help: "Attempts to fire an entry that failed and will be retried.",
		}),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sundial_dispatcher_runs_dead_lettered_total",
			Help: "Runs whose record Kafka refused for good, written to the dead-letter topic instead, by code (record_too_large, record_invalid, topic_refused).",
		}, []string{"code"}),
		enqueuedEventErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sundial_dispatcher_enqueued_event_errors_total",
			Help: "Writes of the ENQUEUED events of acknowledged runs that failed (the runs are out; only their ENQUEUED events are missing).",
		}),
		shardsOwned: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sundial_dispatcher_shards_owned",
			Help: "Shards this dispatcher has claimed and is dispatching.",
		}),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sundial_dispatcher_claims_total",
			Help: "Shard claims, by result (claimed, conflict, error, stale: the shard was claimed by a newer owner).",
		}, []string{"result"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sundial_dispatcher_shard_lag_seconds",
			Help: "Age of the oldest entry of the shard that is due and not yet dispatched; 0 when none is.",
		}, []string{"shard"}),
		watermarkAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sundial_dispatcher_watermark_age_seconds",
			Help: "Now minus the shard's watermark.",
		}, []string{"shard"}),
		entries: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sundial_dispatcher_entries_in_memory",
			Help: "Entries of the shard held in memory (waiting or being fired).",
		}, []string{"shard"}),
		bucketLoad: prometheus.NewHistogram(telemetry.HistogramOpts("sundial_dispatcher_bucket_load_seconds",
			"Time to read one minute bucket of one shard.",
			telemetry.CallBuckets())),
		bucketSize: prometheus.NewHistogram(telemetry.HistogramOpts("sundial_dispatcher_bucket_entries",
			"Entries in one minute bucket of one shard when read.",
			[]float64{0, 1, 10, 100, 1000, 10000, 100000, 1000000})),
		wakeups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sundial_dispatcher_wakeups_total",
			Help: "Wake-up records read from sundial.shards, by result (taken: into memory; ignored: known already or beyond the loaded window; invalid).",
		}, []string{"result"}),
		jobCache: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sundial_dispatcher_job_cache_total",
			Help: "Job definitions wanted by firings and bucket reads, by result (snapshot: a firing used the definition its entry carries, with no read; prefetch: read with a bucket; hit: a firing found it in memory; miss: a firing read it from the store; invalidated: dropped because the registry answered a change; replan: a firing prepared from memory found the job changed at its firing time and was planned again).",
		}, []string{"result"}),
		jobsCached: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sundial_dispatcher_jobs_cached",
			Help: "Job definitions held in memory for the entries of the loaded windows.",
		}),
		jobFeedLag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sundial_dispatcher_job_feed_lag_seconds",
			Help: "Now minus the time up to which every answer of the registry on sundial.jobs.status has been applied to the job definitions in memory; above the prepare-ahead time, firings read their jobs from the store.",
		}),
	}
	var errs []error
	for _, c := range []prometheus.Collector{
		m.dispatchLatency, m.runs, m.teamRuns, m.dropped, m.fireErrors, m.deadLettered, m.enqueuedEventErrors, m.firePhase, m.shardsOwned, m.claims,
		m.lag, m.watermarkAge, m.entries, m.bucketLoad, m.bucketSize, m.wakeups,
		m.jobCache, m.jobsCached, m.jobFeedLag,
	} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// forgetShard removes the shard's series when the shard is given up.
func (m *metrics) forgetShard(shard int) {
	s := strconv.Itoa(shard)
	m.lag.DeleteLabelValues(s)
	m.watermarkAge.DeleteLabelValues(s)
	m.entries.DeleteLabelValues(s)
}
