package leasing

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrTeamFull is returned by AcquireTeamSlot when every slot of the team is
// taken: the team has its max_concurrent_runs runs executing.
var ErrTeamFull = errors.New("leasing: the team's concurrent runs are at its quota")

// Team slots bound the runs of one team that execute at once
// (quota.Quota.MaxConcurrentRuns), as a job's slots bound its runs. A
// runner takes the team slot before the job's lease and gives it back when
// the attempt ends. A team slot is a member of a sorted set scored by its
// expiry on the server's clock, renewed by its holder (RenewTeamSlots)
// like a lease, so a slot of a dead runner comes back after TTL with no
// sweeper. It carries no fencing token: the job's lease, not the team slot,
// decides who may execute a run; the team slot only counts. The key has its
// own hash tag ({team:<team>}), so on a cluster it is a separate call from
// the job's lease.

func (s *Store) teamSlotsKey(team string) string {
	return s.cfg.KeyPrefix + "{team:" + team + "}:team-slots"
}

func validateTeam(team string) error {
	switch {
	case team == "":
		return errors.New("field Team: is empty")
	case strings.ContainsAny(team, "{}"):
		return fmt.Errorf("field Team: %q contains '{' or '}', which cannot be inside a cluster hash tag", team)
	}
	return nil
}

// AcquireTeamSlot takes one of team's limit slots for runID, or refreshes
// the one it holds (so a retried call succeeds). It fails with ErrTeamFull
// when all are taken; expired slots are reclaimed first.
func (s *Store) AcquireTeamSlot(ctx context.Context, team, runID string, limit int) error {
	if err := validateTeam(team); err != nil {
		return fmt.Errorf("leasing: team slot: %w", err)
	}
	if runID == "" || limit < 1 {
		return fmt.Errorf("leasing: team slot of team %s: run id %q and limit %d: want a run id and a positive limit", team, runID, limit)
	}
	v, err := s.eval(ctx, s.scripts.teamAcquire, call{keys: []string{s.teamSlotsKey(team)}, args: []any{runID, limit, ms(s.cfg.TTL)}})
	if err != nil {
		return fmt.Errorf("leasing: acquire a slot of team %s for run %s: %w", team, runID, err)
	}
	if n, _ := v.(int64); n != 1 {
		return fmt.Errorf("team %s, run %s: %w", team, runID, ErrTeamFull)
	}
	return nil
}

// RenewTeamSlots extends the slots of runIDs for another TTL, taking back
// any that expired meanwhile, and returns how many slots of team are in use.
func (s *Store) RenewTeamSlots(ctx context.Context, team string, runIDs []string) (int, error) {
	if err := validateTeam(team); err != nil {
		return 0, fmt.Errorf("leasing: team slot: %w", err)
	}
	args := make([]any, 0, len(runIDs)+1)
	args = append(args, ms(s.cfg.TTL))
	for _, id := range runIDs {
		args = append(args, id)
	}
	v, err := s.eval(ctx, s.scripts.teamRenew, call{keys: []string{s.teamSlotsKey(team)}, args: args})
	if err != nil {
		return 0, fmt.Errorf("leasing: renew %d slots of team %s: %w", len(runIDs), team, err)
	}
	n, _ := v.(int64)
	return int(n), nil
}

// ReleaseTeamSlot gives back runID's slot of team; releasing a slot not held
// does nothing.
func (s *Store) ReleaseTeamSlot(ctx context.Context, team, runID string) error {
	if err := validateTeam(team); err != nil {
		return fmt.Errorf("leasing: team slot: %w", err)
	}
	if err := s.cfg.Client.ZRem(ctx, s.teamSlotsKey(team), runID).Err(); err != nil {
		return fmt.Errorf("leasing: release the slot of team %s for run %s: %w", team, runID, err)
	}
	return nil
}

// TeamSlotsInUse returns how many slots of team are held and unexpired: the
// team's runs executing now, across all runners.
func (s *Store) TeamSlotsInUse(ctx context.Context, team string) (int, error) {
	if err := validateTeam(team); err != nil {
		return 0, fmt.Errorf("leasing: team slot: %w", err)
	}
	v, err := s.eval(ctx, s.scripts.teamCount, call{keys: []string{s.teamSlotsKey(team)}})
	if err != nil {
		return 0, fmt.Errorf("leasing: count the slots of team %s: %w", team, err)
	}
	n, _ := v.(int64)
	return int(n), nil
}

// TTL is how long a lease or team slot lives after its last acquire or
// renewal; holders renew every TTL/3.
func (s *Store) TTL() time.Duration { return s.cfg.TTL }
