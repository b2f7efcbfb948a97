package operator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sundialhq/sundial/audit"
	"github.com/sundialhq/sundial/discovery"
	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/schedule"
	"github.com/sundialhq/sundial/store"
)

// PlanHorizon is how far ahead PlanApply counts the load a definition
// adds.
const PlanHorizon = time.Hour

// DefinitionPlan is what applying one definition would do.
type DefinitionPlan struct {
	JobID string
	// Errors: the definition is invalid; the rest is empty.
	Errors []jobspec.FieldError
	// Created: no definition is in force; Changes lists every set field.
	// The diff is the audit trail's (audit.Diff), so a plan and the record
	// of its apply name fields and values alike.
	Created bool
	Changes []audit.Change
	// NextFires are the next fire times of the new definition (at most
	// the number asked), as if it were accepted now.
	NextFires []time.Time
	// Shard is the job's shard; Load counts the runs the new definition
	// adds in the next PlanHorizon per minute bucket, minus those of the
	// definition in force (negative where it removes some): each
	// occurrence counts RunsPerOccurrence runs (see runsPerOccurrence).
	Shard int
	Load  map[time.Time]int
	// RunsPerOccurrence is how many runs one occurrence of the new
	// definition starts: 1, the shard count of a SHARDED job, or the live
	// members of a BROADCAST job's pool. LoadLowerBound: it is a BROADCAST
	// job whose pool's membership is not known (Config.Members unset, or no
	// member live), counted as 1, so Load is a lower bound.
	RunsPerOccurrence int
	LoadLowerBound    bool
}

// runsPerOccurrence is how many runs one occurrence of spec starts, which
// is what the runners execute and the team's max_runs_per_minute counts: a
// SHARDED job starts one child per shard, a BROADCAST job one per live
// member of its pool (members, nil when unknown), any other job one.
// lowerBound: a BROADCAST job whose membership is unknown or empty, counted
// as one run.
func runsPerOccurrence(spec *sundialv1.JobSpec, members func(pool string) int) (n int, lowerBound bool) {
	r := spec.GetRouting()
	switch r.GetStrategy() {
	case sundialv1.RoutingStrategy_ROUTING_STRATEGY_SHARDED:
		return max(int(r.GetShards()), 1), false
	case sundialv1.RoutingStrategy_ROUTING_STRATEGY_BROADCAST:
		if members == nil {
			return 1, true
		}
		if m := members(cmp.Or(spec.GetPool(), discovery.DefaultPool)); m > 0 {
			return m, false
		}
		return 1, true
	}
	return 1, false
}

// PlanApply says, for each definition, what applying it would change: the
// field diff against the stored definition, the next fire times and the
// load it adds to its shard's minute buckets in the next hour. It reads
// the stored definitions and produces nothing.
func (o *Operator) PlanApply(ctx context.Context, specs []*sundialv1.JobSpec, fires int) ([]DefinitionPlan, error) {
	if err := o.need("plan", map[string]bool{"Jobs": o.cfg.Jobs != nil, "Shards": o.cfg.Shards > 0}); err != nil {
		return nil, err
	}
	now := o.cfg.Now()
	out := make([]DefinitionPlan, 0, len(specs))
	for _, spec := range specs {
		p := DefinitionPlan{JobID: spec.GetId(), Shard: store.ShardOf(spec.GetId(), o.cfg.Shards), Load: map[time.Time]int{}}
		if p.Errors = jobspec.Validate(spec); len(p.Errors) > 0 {
			out = append(out, p)
			continue
		}
		var old *sundialv1.JobSpec
		stored, err := o.cfg.Jobs.GetJob(ctx, spec.GetId())
		switch {
		case errors.Is(err, store.ErrNotFound), err == nil && stored.Deleted:
			p.Created = true
		case err != nil:
			return out, fmt.Errorf("read job %q: %w", spec.GetId(), err)
		default:
			if old, err = decodeSpec(stored.Spec); err != nil {
				return out, fmt.Errorf("job %q: the stored definition does not decode: %w", spec.GetId(), err)
			}
		}
		p.Changes = audit.Diff(old, spec)
		newSched := compiled(spec, now)
		p.NextFires = nextFires(newSched, spec.GetSchedule(), now, fires)
		p.RunsPerOccurrence, p.LoadLowerBound = runsPerOccurrence(spec, o.cfg.Members)
		for _, t := range within(newSched, now, now.Add(PlanHorizon)) {
			p.Load[store.BucketOf(t)] += p.RunsPerOccurrence
		}
		if old != nil {
			oldRuns, _ := runsPerOccurrence(old, o.cfg.Members)
			for _, t := range within(compiled(old, stored.UpdatedAt), now, now.Add(PlanHorizon)) {
				b := store.BucketOf(t)
				if p.Load[b] -= oldRuns; p.Load[b] == 0 {
					delete(p.Load, b)
				}
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// compiled is spec's schedule anchored at accepted, or nil when it fires
// nothing (no schedule, paused, or a schedule that does not compile).
func compiled(spec *sundialv1.JobSpec, accepted time.Time) *schedule.Schedule {
	return compiledSchedule(spec.GetSchedule(), spec.GetPaused(), accepted)
}

// compiledSchedule is sched anchored at accepted, or nil when it fires
// nothing.
func compiledSchedule(sched *sundialv1.Schedule, paused bool, accepted time.Time) *schedule.Schedule {
	if sched == nil || paused {
		return nil
	}
	s, errs := jobspec.CompileSchedule(sched, accepted)
	if len(errs) > 0 {
		return nil
	}
	return s
}

// NextFires are the first n fire times of a definition's schedule, a
// job's or a DAG's, as if it were accepted at now: none without a
// schedule, when paused, or when the schedule does not compile (the
// definition's validation says why).
func NextFires(sched *sundialv1.Schedule, paused bool, now time.Time, n int) []time.Time {
	return nextFires(compiledSchedule(sched, paused, now), sched, now, n)
}

func nextFires(s *schedule.Schedule, sched *sundialv1.Schedule, now time.Time, n int) []time.Time {
	if s == nil || n <= 0 {
		return nil
	}
	t, ok := jobspec.FirstDue(s, jobspec.MisfirePolicy(sched), jobspec.CatchUpWindow(sched), now, now)
	var out []time.Time
	for ; ok && len(out) < n; t, ok = s.Next(t) {
		out = append(out, store.Truncate(t))
	}
	return out
}

// within returns the occurrences of s in [from, to).
func within(s *schedule.Schedule, from, to time.Time) []time.Time {
	if s == nil {
		return nil
	}
	var out []time.Time
	for t, ok := s.Next(from.Add(-time.Nanosecond)); ok && t.Before(to); t, ok = s.Next(t) {
		out = append(out, t)
	}
	return out
}
