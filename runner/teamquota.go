package runner

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/internal/backoff"
	"github.com/sundialhq/sundial/leasing"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/quota"
)

// TeamQuotas gives the quota in force for a team (*quota.Cache).
type TeamQuotas interface {
	Get(ctx context.Context, team string) (quota.Quota, error)
}

// decodeFetched wraps a fetched record, with its run decoded when it
// decodes (process reports one that does not).
func decodeFetched(rec *kgo.Record, received time.Time) *record {
	fr := &record{rec: rec, received: received}
	run := &sundialv1.Run{}
	if decodeRun(rec, run) == nil {
		fr.run, fr.team = run, run.GetOwnerTeam()
	}
	return fr
}

// teamResult says how taking a team slot ended.
type teamResult int

const (
	teamTaken   teamResult = iota // or no limit applies
	teamFull                      // the team has its max_concurrent_runs
	teamRate                      // the team has started its max_runs_per_minute this minute
	teamAborted                   // ctx ended
)

// teamGate applies the quotas of the run's team before its lease is
// taken (take), and gives the team's slot back when the attempt ends.
type teamGate struct{ *execution }

// take applies the quotas of the run's team before the run
// starts: it takes a slot of the team when the team has a
// max_concurrent_runs, then counts the run among the team's runs of this
// minute when it has a max_runs_per_minute, and returns the function that
// gives the slot back. A run over max_runs_per_minute gives its slot back
// and is deferred by wait (to the next minute); one over
// max_concurrent_runs is deferred by delay. Quotas bound
// fairness, not safety: when they cannot be read, or the team's name
// cannot be a Redis hash tag, the run goes ahead without them (and the
// job's lease still guards it). Redis being unreachable is waited out, as
// for the job's lease.
func (g teamGate) take(ctx context.Context) (release func(), res teamResult, wait time.Duration) {
	r, team := g.r, g.run.GetOwnerTeam()
	none := func() {}
	if r.cfg.TeamQuotas == nil || team == "" {
		return none, teamTaken, 0
	}
	q, err := r.cfg.TeamQuotas.Get(ctx, team)
	if err != nil {
		g.logger().Warn("team quota unknown; running without the team's limit", "team", team, "err", err)
		return none, teamTaken, 0
	}
	release = none
	if q.MaxConcurrentRuns > 0 {
		if release, res = g.acquireSlot(ctx, team, q.MaxConcurrentRuns); res != teamTaken {
			return none, res, 0
		}
	}
	if q.MaxRunsPerMinute > 0 {
		// Counted once the slot is held, so that a run deferred for the
		// team's concurrency does not spend a place of the minute.
		if res, wait = g.countRun(ctx, team, q.MaxRunsPerMinute); res != teamTaken {
			release()
			return none, res, wait
		}
	}
	return release, teamTaken, 0
}

// acquireSlot takes one of the team's limit slots.
func (g teamGate) acquireSlot(ctx context.Context, team string, limit int) (func(), teamResult) {
	r, none := g.r, func() {}
	retry := backoff.New(50*time.Millisecond, 5*time.Second)
	runID := g.run.GetRunId()
	for {
		err := r.cfg.Leases.AcquireTeamSlot(ctx, team, runID, limit)
		switch {
		case err == nil:
			r.teamSlots.add(team, runID)
			r.m.teamRuns.WithLabelValues(team).Inc()
			return func() { g.releaseSlot(ctx, team) }, teamTaken
		case errors.Is(err, leasing.ErrTeamFull):
			return none, teamFull
		case ctx.Err() != nil:
			return none, teamAborted
		case !leasing.IsRetryable(err):
			g.logger().Warn("team slot refused; running without the team's limit", "team", team, "err", err)
			return none, teamTaken
		}
		g.logger().Warn("team slot acquire failed; retrying", "team", team, "err", err, "retry_within", retry.Peek())
		if !retry.Wait(ctx) {
			return none, teamAborted
		}
	}
}

// countRun counts the run among the runs its team starts this minute
// (leasing.StartTeamRun, one atomic script), and when the team has started
// limit already returns teamRate and how long until the next minute, spread
// by up to one Config.TeamQuotaDelay (the run's jitter) so that the runs
// deferred together do not all come back at the same instant.
func (g teamGate) countRun(ctx context.Context, team string, limit int) (teamResult, time.Duration) {
	r := g.r
	retry := backoff.New(50*time.Millisecond, 5*time.Second)
	for {
		err := r.cfg.Leases.StartTeamRun(ctx, team, g.run.GetRunId(), limit)
		var rate *leasing.TeamRateError
		switch {
		case err == nil:
			return teamTaken, 0
		case errors.As(err, &rate):
			spread := time.Duration(float64(r.cfg.TeamQuotaDelay) * r.cfg.Jitter(g.run.GetRunId(), g.run.GetAttempt()))
			return teamRate, rate.RetryIn + spread
		case ctx.Err() != nil:
			return teamAborted, 0
		case !leasing.IsRetryable(err):
			g.logger().Warn("team rate refused; running without the team's limit", "team", team, "err", err)
			return teamTaken, 0
		}
		g.logger().Warn("team rate count failed; retrying", "team", team, "err", err, "retry_within", retry.Peek())
		if !retry.Wait(ctx) {
			return teamAborted, 0
		}
	}
}

// delay is how long a run over its team's quota waits: between one
// and two Config.TeamQuotaDelay, spread by the run's jitter, so that a team's
// herd waiting for its slots does not come back all at once.
func (g teamGate) delay() time.Duration {
	d := g.r.cfg.TeamQuotaDelay
	return d + time.Duration(float64(d)*g.r.cfg.Jitter(g.run.GetRunId(), g.run.GetAttempt()))
}

// releaseSlot gives the run's team slot back, best effort: a slot not
// released expires TTL after its last renewal.
func (g teamGate) releaseSlot(ctx context.Context, team string) {
	r, runID := g.r, g.run.GetRunId()
	r.teamSlots.remove(team, runID)
	r.m.teamRuns.WithLabelValues(team).Dec()
	if r.isKilled() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := r.cfg.Leases.ReleaseTeamSlot(ctx, team, runID); err != nil {
		g.logger().Warn("team slot release failed; it frees when it expires", "team", team, "err", err)
	}
}

// teamSlots are the team slots a runner holds: team -> run id -> how many
// executions hold it (two deliveries of one run may overlap for a moment).
type teamSlots struct {
	mu   sync.Mutex
	held map[string]map[string]int
}

func (t *teamSlots) add(team, runID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.held == nil {
		t.held = map[string]map[string]int{}
	}
	if t.held[team] == nil {
		t.held[team] = map[string]int{}
	}
	t.held[team][runID]++
}

func (t *teamSlots) remove(team, runID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	runs := t.held[team]
	if runs[runID]--; runs[runID] <= 0 {
		delete(runs, runID)
	}
	if len(runs) == 0 {
		delete(t.held, team)
	}
}

// snapshot returns the run ids held per team.
func (t *teamSlots) snapshot() map[string][]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string][]string, len(t.held))
	for team, runs := range t.held {
		for id := range runs {
			out[team] = append(out[team], id)
		}
	}
	return out
}

// renewLoop renews every team slot held every TTL/3 of leases, one call
// per team, until ctx ends. A renewal that fails is logged; the slot
// expires only if none succeeds for TTL, and the next renewal takes it back
// while its run still executes.
func (t *teamSlots) renewLoop(ctx context.Context, leases *leasing.Store, log *slog.Logger) {
	tick := time.NewTicker(leases.TTL() / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for team, runs := range t.snapshot() {
			if _, err := leases.RenewTeamSlots(ctx, team, runs); err != nil && ctx.Err() == nil {
				log.Warn("team slot renewal failed", "team", team, "runs", len(runs), "err", err)
			}
		}
	}
}
