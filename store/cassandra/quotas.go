package cassandra

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"

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
	err := s.idempotent(ctx, fmt.Sprintf(`INSERT INTO %s.team_quotas (team, max_jobs, max_concurrent_runs, max_runs_per_minute, updated_at) VALUES (?, ?, ?, ?, ?)`, s.cfg.Keyspace),
		q.Team, q.MaxJobs, q.MaxConcurrentRuns, q.MaxRunsPerMinute, s.cfg.Now().UTC()).Exec()
	if err != nil {
		return fmt.Errorf("write the quota of team %s: %w", q.Team, err)
	}
	return nil
}

// ListQuotas implements quota.Store. The table holds a row per team with a
// quota of its own, few enough to read whole.
func (s *Store) ListQuotas(ctx context.Context) ([]quota.Quota, error) {
	iter := s.idempotent(ctx, fmt.Sprintf(`SELECT team, max_jobs, max_concurrent_runs, max_runs_per_minute FROM %s.team_quotas`, s.cfg.Keyspace)).Iter()
	var (
		out []quota.Quota
		q   quota.Quota
	)
	// A row written before migration 10 has no max_runs_per_minute: null
	// scans as 0, unlimited.
	for iter.Scan(&q.Team, &q.MaxJobs, &q.MaxConcurrentRuns, &q.MaxRunsPerMinute) {
		out = append(out, q)
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("read team quotas: %w", err)
	}
	slices.SortFunc(out, func(a, b quota.Quota) int { return cmp.Compare(a.Team, b.Team) })
	return out, nil
}

// TrackTeamJob implements quota.Store as TrackTeamJobs does.
func (s *Store) TrackTeamJob(ctx context.Context, team, jobID string, revision int64) error {
	return s.TrackTeamJobs(ctx, []quota.TeamJob{{Team: team, JobID: jobID, Revision: revision}})
}

// UntrackTeamJob implements quota.Store as TrackTeamJobs does.
func (s *Store) UntrackTeamJob(ctx context.Context, jobID string, revision int64) error {
	return s.TrackTeamJobs(ctx, []quota.TeamJob{{JobID: jobID, Revision: revision}})
}

// TrackTeamJobs implements quota.Store: the memberships of all the jobs are
// read at once (job_teams, readGroup ids per read), then the index rows of
// every change are written together, then the changes' job_teams rows
// (writeByPartition). A call cut short after the index rows is completed by
// the redelivery that repeats it, since job_teams still has the older
// revision. A job id that appears twice makes the call apply the moves one
// after the other, so that the second reads what the first wrote.
func (s *Store) TrackTeamJobs(ctx context.Context, moves []quota.TeamJob) error {
	seen := make(map[string]bool, len(moves))
	for _, m := range moves {
		if seen[m.JobID] {
			for _, m := range moves {
				if err := s.indexTeamJobs(ctx, []quota.TeamJob{m}); err != nil {
					return err
				}
			}
			return nil
		}
		seen[m.JobID] = true
	}
	return s.indexTeamJobs(ctx, moves)
}

// membership is a job's row of job_teams.
type membership struct {
	team     string
	revision int64
}

// indexTeamJobs applies moves of distinct jobs.
func (s *Store) indexTeamJobs(ctx context.Context, moves []quota.TeamJob) error {
	if len(moves) == 0 {
		return nil
	}
	ids := make([]string, len(moves))
	for i, m := range moves {
		ids[i] = m.JobID
	}
	current, err := s.jobTeams(ctx, ids)
	if err != nil {
		return err
	}
	ks := s.cfg.Keyspace
	var (
		removeStmt = fmt.Sprintf(`DELETE FROM %s.team_jobs USING TIMESTAMP ? WHERE team = ? AND job_id = ?`, ks)
		addStmt    = fmt.Sprintf(`INSERT INTO %s.team_jobs (team, job_id) VALUES (?, ?) USING TIMESTAMP ?`, ks)
		ownerStmt  = fmt.Sprintf(`INSERT INTO %s.job_teams (job_id, team, revision) VALUES (?, ?, ?) USING TIMESTAMP ?`, ks)
		index      []partStmt
		owners     []partStmt
	)
	for _, m := range moves {
		old, found := current[m.JobID]
		if found && old.revision >= m.Revision {
			continue // a replay: a newer or the same change is in place
		}
		ts := rowTimestamp(m.Revision)
		if found && old.team != "" && old.team != m.Team {
			index = append(index, partStmt{part: old.team, stmt: removeStmt, args: []any{ts, old.team, m.JobID}, bytes: len(old.team) + len(m.JobID)})
		}
		if m.Team != "" {
			index = append(index, partStmt{part: m.Team, stmt: addStmt, args: []any{m.Team, m.JobID, ts}, bytes: len(m.Team) + len(m.JobID)})
		}
		owners = append(owners, partStmt{part: m.JobID, stmt: ownerStmt, args: []any{m.JobID, m.Team, m.Revision, ts}, bytes: len(m.JobID) + len(m.Team)})
	}
	if err := s.writeByPartition(ctx, index, s.cfg.BatchSize, maxRowBatchBytes); err != nil {
		return fmt.Errorf("index %d jobs by team (the first %s): %w", len(moves), moves[0].JobID, err)
	}
	if err := s.writeByPartition(ctx, owners, s.cfg.BatchSize, maxRowBatchBytes); err != nil {
		return fmt.Errorf("record the team of %d jobs (the first %s): %w", len(moves), moves[0].JobID, err)
	}
	return nil
}

// jobTeams reads the job_teams rows of ids (distinct), readGroup ids per
// read (WHERE job_id IN), all at once.
func (s *Store) jobTeams(ctx context.Context, ids []string) (map[string]membership, error) {
	stmt := fmt.Sprintf(`SELECT job_id, team, revision FROM %s.job_teams WHERE job_id IN ?`, s.cfg.Keyspace)
	out := make(map[string]membership, len(ids))
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	for group := range slices.Chunk(ids, readGroup) {
		g.Go(func() error {
			it := s.idempotent(gctx, stmt, group).Iter()
			var (
				id string
				m  membership
			)
			for it.Scan(&id, &m.team, &m.revision) {
				mu.Lock()
				out[id] = m
				mu.Unlock()
			}
			if err := it.Close(); err != nil {
				return fmt.Errorf("read the teams of %d jobs (%q to %q): %w", len(group), group[0], group[len(group)-1], err)
			}
			return nil
		})
	}
	return out, g.Wait()
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
