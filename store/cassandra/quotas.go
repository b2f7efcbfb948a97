package cassandra

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/gocql/gocql"

	"github.com/sundialhq/sundial/quota"
)

// The Store keeps the team quotas and the per-team job index (migration 8)
// as quota.Store. Index rows are written at rowTimestamp(revision), as job
// rows are, so Cassandra keeps the newest revision's cells whatever order
// the writes arrive in; job_teams remembers the revision of the last change
// of each job, so a replayed older call is recognised and changes nothing.
var _ quota.Store = (*Store)(nil)

// SetQuota implements quota.Store.
func (s *Store) SetQuota(ctx context.Context, q quota.Quota) error {
	if err := q.Validate(); err != nil {
		return err
	}
	err := s.idempotent(ctx, fmt.Sprintf(`INSERT INTO %s.team_quotas (team, max_jobs, max_concurrent_runs, updated_at) VALUES (?, ?, ?, ?)`, s.cfg.Keyspace),
		q.Team, q.MaxJobs, q.MaxConcurrentRuns, s.cfg.Now().UTC()).Exec()
	if err != nil {
		return fmt.Errorf("write the quota of team %s: %w", q.Team, err)
	}
	return nil
}

// ListQuotas implements quota.Store. The table holds a row per team with a
// quota of its own, few enough to read whole.
func (s *Store) ListQuotas(ctx context.Context) ([]quota.Quota, error) {
	iter := s.idempotent(ctx, fmt.Sprintf(`SELECT team, max_jobs, max_concurrent_runs FROM %s.team_quotas`, s.cfg.Keyspace)).Iter()
	var (
		out []quota.Quota
		q   quota.Quota
	)
	for iter.Scan(&q.Team, &q.MaxJobs, &q.MaxConcurrentRuns) {
		out = append(out, q)
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("read team quotas: %w", err)
	}
	slices.SortFunc(out, func(a, b quota.Quota) int { return cmp.Compare(a.Team, b.Team) })
	return out, nil
}

// TrackTeamJob implements quota.Store. The index rows are written before
// job_teams, so a call cut short is completed by the redelivery that repeats
// it.
func (s *Store) TrackTeamJob(ctx context.Context, team, jobID string, revision int64) error {
	return s.indexTeamJob(ctx, team, jobID, revision)
}

// UntrackTeamJob implements quota.Store.
func (s *Store) UntrackTeamJob(ctx context.Context, jobID string, revision int64) error {
	return s.indexTeamJob(ctx, "", jobID, revision)
}

// indexTeamJob moves jobID to team ("" for none) as of revision.
func (s *Store) indexTeamJob(ctx context.Context, team, jobID string, revision int64) error {
	ks := s.cfg.Keyspace
	var (
		old    string
		oldRev int64
	)
	err := s.idempotent(ctx, fmt.Sprintf(`SELECT team, revision FROM %s.job_teams WHERE job_id = ?`, ks), jobID).Scan(&old, &oldRev)
	found := err == nil
	if err != nil && !errors.Is(err, gocql.ErrNotFound) {
		return fmt.Errorf("read the team of job %s: %w", jobID, err)
	}
	if found && oldRev >= revision {
		return nil // a replay: a newer or the same change is in place
	}
	ts := rowTimestamp(revision)
	if found && old != "" && old != team {
		err := s.idempotent(ctx, fmt.Sprintf(`DELETE FROM %s.team_jobs USING TIMESTAMP ? WHERE team = ? AND job_id = ?`, ks), ts, old, jobID).Exec()
		if err != nil {
			return fmt.Errorf("remove job %s from team %s: %w", jobID, old, err)
		}
	}
	if team != "" {
		err := s.idempotent(ctx, fmt.Sprintf(`INSERT INTO %s.team_jobs (team, job_id) VALUES (?, ?) USING TIMESTAMP ?`, ks), team, jobID, ts).Exec()
		if err != nil {
			return fmt.Errorf("add job %s to team %s: %w", jobID, team, err)
		}
	}
	err = s.idempotent(ctx, fmt.Sprintf(`INSERT INTO %s.job_teams (job_id, team, revision) VALUES (?, ?, ?) USING TIMESTAMP ?`, ks), jobID, team, revision, ts).Exec()
	if err != nil {
		return fmt.Errorf("record the team of job %s: %w", jobID, err)
	}
	return nil
}

// CountTeamJobs implements quota.Store. It reads the team's partition of
// the index: one row per job.
func (s *Store) CountTeamJobs(ctx context.Context, team string) (int, error) {
	var n int64
	err := s.idempotent(ctx, fmt.Sprintf(`SELECT COUNT(*) FROM %s.team_jobs WHERE team = ?`, s.cfg.Keyspace), team).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count the jobs of team %s: %w", team, err)
	}
	return int(n), nil
}
