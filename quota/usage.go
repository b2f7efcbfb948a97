package quota

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// RunCounter counts the runs of a team executing now, across all runners
// (leasing.Store.TeamSlotsInUse: the team slots held).
type RunCounter interface {
	TeamSlotsInUse(ctx context.Context, team string) (int, error)
}

// Usage is a team's quota in force with what the team uses of it.
type Usage struct {
	Quota
	// Jobs is the team's jobs in the index.
	Jobs int
	// ConcurrentRuns is the team slots held now; -1 when not counted
	// (no RunCounter, or the team has no max_concurrent_runs: runs of a
	// team without a limit take no slot).
	ConcurrentRuns int
}

// Usages returns the quota in force and the usage of each team, for the
// CLI, the API and the metrics. With no teams named it reports every team
// that has a row, then the default row (as DefaultTeam, with no usage).
// runs may be nil.
func Usages(ctx context.Context, s Store, runs RunCounter, teams ...string) ([]Usage, error) {
	rows, err := s.ListQuotas(ctx)
	if err != nil {
		return nil, err
	}
	var def *Quota
	if len(teams) == 0 {
		for _, q := range rows {
			if q.Team == DefaultTeam {
				def = &q
				continue
			}
			teams = append(teams, q.Team)
		}
	}
	out := make([]Usage, 0, len(teams)+1)
	for _, team := range teams {
		u := Usage{Quota: Effective(rows, team), ConcurrentRuns: -1}
		if u.Jobs, err = s.CountTeamJobs(ctx, team); err != nil {
			return nil, err
		}
		if runs != nil && u.MaxConcurrentRuns > 0 {
			if u.ConcurrentRuns, err = runs.TeamSlotsInUse(ctx, team); err != nil {
				return nil, fmt.Errorf("count the runs of team %s: %w", team, err)
			}
		}
		out = append(out, u)
	}
	if def != nil {
		out = append(out, Usage{Quota: *def, Jobs: -1, ConcurrentRuns: -1})
	}
	return out, nil
}

// Collector exports the quotas and usage of every team with a row of its
// own as metrics, read at each scrape (Usages):
//
//	sundial_quota_limit{team, quota="max_jobs"|"max_concurrent_runs"}  (0: unlimited)
//	sundial_quota_usage{team, quota="max_jobs"|"max_concurrent_runs"}
//
// Register it with the injected Registerer of one process that reaches both
// Cassandra and Redis (sundial runner does).
type Collector struct {
	store   Store
	runs    RunCounter
	timeout time.Duration
	limit   *prometheus.Desc
	usage   *prometheus.Desc
	errors  prometheus.Counter
}

// NewCollector returns a Collector; timeout bounds each scrape's reads
// (default 5s).
func NewCollector(s Store, runs RunCounter, timeout time.Duration) *Collector {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	return &Collector{
		store: s, runs: runs, timeout: timeout,
		limit: prometheus.NewDesc("sundial_quota_limit", "A team's quota in force, by quota (max_jobs, max_concurrent_runs, max_runs_per_minute); 0 is unlimited.", []string{"team", "quota"}, nil),
		usage: prometheus.NewDesc("sundial_quota_usage", "What a team uses of a quota: its jobs (max_jobs) and its runs executing now (max_concurrent_runs).", []string{"team", "quota"}, nil),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sundial", Subsystem: "quota", Name: "scrape_errors_total",
			Help: "Scrapes of the quota metrics that could not read the quotas or their usage.",
		}),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.limit
	ch <- c.usage
	c.errors.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	usages, err := Usages(ctx, c.store, c.runs)
	if err != nil {
		c.errors.Inc()
	}
	for _, u := range usages {
		if u.Team == DefaultTeam {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(u.MaxJobs), u.Team, "max_jobs")
		ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(u.MaxConcurrentRuns), u.Team, "max_concurrent_runs")
		ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(u.MaxRunsPerMinute), u.Team, "max_runs_per_minute")
		ch <- prometheus.MustNewConstMetric(c.usage, prometheus.GaugeValue, float64(u.Jobs), u.Team, "max_jobs")
		if u.ConcurrentRuns >= 0 {
			ch <- prometheus.MustNewConstMetric(c.usage, prometheus.GaugeValue, float64(u.ConcurrentRuns), u.Team, "max_concurrent_runs")
		}
	}
	c.errors.Collect(ch)
}
