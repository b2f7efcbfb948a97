package quota

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
)

// DefaultTeam is the team name of the default quota, which applies to every
// team without a row of its own.
const DefaultTeam = "*"

// MaxLimit is the largest limit a quota holds: the store keeps each in a
// 32-bit integer.
const MaxLimit = math.MaxInt32

// Quota bounds one team. Zero in a limit means unlimited.
type Quota struct {
	// Team is the team name, or DefaultTeam for the default.
	Team string
	// MaxJobs is how many job definitions the team may own.
	MaxJobs int
	// MaxConcurrentRuns is how many runs of the team's jobs may execute at
	// once, across all runners.
	MaxConcurrentRuns int
	// MaxRunsPerMinute is how many runs of the team's jobs may start in one
	// minute (a window of the Redis server's clock), across all runners:
	// every child of a BROADCAST or SHARDED run counts. It bounds what one
	// definition can fan out to (1,024 shards every second is 61,440 runs
	// a minute).
	MaxRunsPerMinute int
}

// Validate reports every bad field.
func (q Quota) Validate() error {
	var errs []error
	switch {
	case q.Team == "":
		errs = append(errs, errors.New("quota: team: required"))
	case strings.ContainsAny(q.Team, "{}"):
		errs = append(errs, fmt.Errorf("quota: team %q: contains '{' or '}', which cannot be inside a Redis hash tag", q.Team))
	}
	for _, l := range []struct {
		field string
		n     int
	}{{"max_jobs", q.MaxJobs}, {"max_concurrent_runs", q.MaxConcurrentRuns}, {"max_runs_per_minute", q.MaxRunsPerMinute}} {
		if err := checkLimit(l.field, int64(l.n)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checkLimit reports a limit out of 0 (unlimited) to MaxLimit, naming its
// field.
func checkLimit(field string, n int64) error {
	switch {
	case n < 0:
		return fmt.Errorf("quota: %s %d: must be 0 (unlimited) or positive", field, n)
	case n > MaxLimit:
		return fmt.Errorf("quota: %s %d: at most %d", field, n, MaxLimit)
	}
	return nil
}

// TeamJob says that JobID belongs to Team ("": to none) as of Revision.
type TeamJob struct {
	Team     string
	JobID    string
	Revision int64
}

// Store keeps quotas and the per-team job index. Implementations are safe
// for concurrent use.
type Store interface {
	// SetQuota writes q, replacing the team's row.
	SetQuota(ctx context.Context, q Quota) error
	// ListQuotas returns every row, the default's included, ordered by team.
	ListQuotas(ctx context.Context) ([]Quota, error)
	// TrackTeamJob records that jobID belongs to team as of revision; a
	// row of an earlier team is removed. A call with a revision older than
	// the job's last TrackTeamJob or UntrackTeamJob changes nothing.
	TrackTeamJob(ctx context.Context, team, jobID string, revision int64) error
	// UntrackTeamJob removes jobID from its team as of revision.
	UntrackTeamJob(ctx context.Context, jobID string, revision int64) error
	// TrackTeamJobs applies each move as TrackTeamJob does (UntrackTeamJob
	// for a move without a team), in one call: the registry tracks the
	// jobs of the definitions it handles at once together. On error some
	// moves may be applied: calling again completes them.
	TrackTeamJobs(ctx context.Context, moves []TeamJob) error
	// CountTeamJobs counts the jobs of team in the index.
	CountTeamJobs(ctx context.Context, team string) (int, error)
}

// Effective returns the quota that applies to team: its own row, else the
// default row with Team set to team, else no limits.
func Effective(rows []Quota, team string) Quota {
	def := Quota{Team: team}
	for _, q := range rows {
		switch q.Team {
		case team:
			return q
		case DefaultTeam:
			def = q
			def.Team = team
		}
	}
	return def
}
