package leasing

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrTeamRate is returned by StartTeamRun when the team has started its
// max_runs_per_minute runs in the current minute. A *TeamRateError carries
// how long until the next minute.
var ErrTeamRate = errors.New("leasing: the team's runs this minute are at its quota")

// TeamRateError says a team has started its limit of runs in the current
// window; RetryIn is the time until the next window opens.
type TeamRateError struct {
	Team    string
	Limit   int
	RetryIn time.Duration
}

func (e *TeamRateError) Error() string {
	return fmt.Sprintf("team %s has started %d runs this minute (quota max_runs_per_minute); next minute in %s", e.Team, e.Limit, e.RetryIn)
}

func (e *TeamRateError) Unwrap() error { return ErrTeamRate }

// TeamRateWindow is the window of max_runs_per_minute.
const TeamRateWindow = time.Minute

// The runs a team starts per minute (quota.Quota.MaxRunsPerMinute) are
// counted in one sorted set per team, in the team's hash tag: a run id is a
// member, scored by the window it started in (the Redis server's time
// divided by TeamRateWindow, so every runner agrees on the windows). A call
// drops the members of earlier windows, then counts the run unless the
// window holds the limit. A run counted in the window already passes again
// without counting (a retried call, a redelivery, a run deferred for its
// team's concurrency), so the count is of distinct runs. The check and the
// count are one script: runners racing for the last place of a window
// cannot both take it. The set expires two windows after its last write.

func (s *Store) teamRateKey(team string) string {
	return s.cfg.KeyPrefix + "{team:" + team + "}:team-rate"
}

// StartTeamRun counts runID among the runs team starts in the current
// window, up to limit. It fails with a *TeamRateError (ErrTeamRate) when
// the window holds limit runs already.
func (s *Store) StartTeamRun(ctx context.Context, team, runID string, limit int) error {
	if err := validateTeam(team); err != nil {
		return fmt.Errorf("leasing: team rate: %w", err)
	}
	if runID == "" || limit < 1 {
		return fmt.Errorf("leasing: team rate of team %s: run id %q and limit %d: want a run id and a positive limit", team, runID, limit)
	}
	v, err := s.eval(ctx, s.scripts.teamRate, call{keys: []string{s.teamRateKey(team)}, args: []any{runID, limit, ms(TeamRateWindow)}})
	if err != nil {
		return fmt.Errorf("leasing: count a run of team %s for run %s: %w", team, runID, err)
	}
	r, _ := v.([]any)
	if len(r) != 2 {
		return fmt.Errorf("leasing: team rate of team %s: unexpected reply %v", team, v)
	}
	if ok, _ := r[0].(int64); ok == 1 {
		return nil
	}
	wait, _ := r[1].(int64)
	return &TeamRateError{Team: team, Limit: limit, RetryIn: time.Duration(wait) * time.Millisecond}
}
