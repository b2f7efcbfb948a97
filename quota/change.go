package quota

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Change sets some limits of one team's row, or of the default row
// (DefaultTeam): a nil limit keeps the value the row has, 0 is unlimited.
// It is what `sundial quotas set` and the API's SetQuotas take, and
// Validate is the one check of both.
type Change struct {
	// Team is the team, or DefaultTeam.
	Team string
	// MaxJobs, MaxConcurrentRuns and MaxRunsPerMinute are the new limits;
	// nil keeps the current one.
	MaxJobs, MaxConcurrentRuns, MaxRunsPerMinute *int64
}

// Validate reports every bad field: a team, at least one limit, and each
// limit from 0 (unlimited) to MaxLimit.
func (c Change) Validate() error {
	var errs []error
	if c.MaxJobs == nil && c.MaxConcurrentRuns == nil && c.MaxRunsPerMinute == nil {
		errs = append(errs, errors.New("quota: max_jobs, max_concurrent_runs, max_runs_per_minute: set at least one"))
	}
	for _, l := range c.limits() {
		if l.value == nil {
			continue
		}
		if err := checkLimit(l.field, *l.value); err != nil {
			errs = append(errs, err)
		}
	}
	// The row's own check: the team's name.
	if err := (Quota{Team: c.Team}).Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

type limit struct {
	field string
	value *int64
	dst   func(*Quota) *int
}

func (c Change) limits() []limit {
	return []limit{
		{"max_jobs", c.MaxJobs, func(q *Quota) *int { return &q.MaxJobs }},
		{"max_concurrent_runs", c.MaxConcurrentRuns, func(q *Quota) *int { return &q.MaxConcurrentRuns }},
		{"max_runs_per_minute", c.MaxRunsPerMinute, func(q *Quota) *int { return &q.MaxRunsPerMinute }},
	}
}

// Apply returns the team's own row among rows (a row without limits when it
// has none: the default row is not copied into it) with c's limits set.
// Call it on a Change that Validate accepts.
func (c Change) Apply(rows []Quota) Quota {
	q := Quota{Team: c.Team}
	for _, r := range rows {
		if r.Team == c.Team {
			q = r
		}
	}
	for _, l := range c.limits() {
		if l.value != nil {
			*l.dst(&q) = int(*l.value)
		}
	}
	return q
}

// Set validates c, applies it to the team's row in s and writes the row.
// It returns the row before (zero limits when the team had none) and
// after. Two changes of one team at the same moment may each keep the
// other's old value of a limit that only the other set: the row is read,
// then written whole.
func Set(ctx context.Context, s Store, c Change) (before, after Quota, err error) {
	if err := c.Validate(); err != nil {
		return Quota{}, Quota{}, err
	}
	rows, err := s.ListQuotas(ctx)
	if err != nil {
		return Quota{}, Quota{}, fmt.Errorf("read the quotas: %w", err)
	}
	before = Change{Team: c.Team}.Apply(rows)
	after = c.Apply(rows)
	if err := s.SetQuota(ctx, after); err != nil {
		return Quota{}, Quota{}, err
	}
	return before, after, nil
}

// Diff says in words which limits differ between two rows of one team:
// "max_jobs unlimited -> 20, max_runs_per_minute 600 -> unlimited", or
// "no limit changed".
func Diff(before, after Quota) string {
	var parts []string
	for _, l := range []struct {
		field     string
		old, next int
	}{
		{"max_jobs", before.MaxJobs, after.MaxJobs},
		{"max_concurrent_runs", before.MaxConcurrentRuns, after.MaxConcurrentRuns},
		{"max_runs_per_minute", before.MaxRunsPerMinute, after.MaxRunsPerMinute},
	} {
		if l.old != l.next {
			parts = append(parts, fmt.Sprintf("%s %s -> %s", l.field, LimitString(l.old), LimitString(l.next)))
		}
	}
	if len(parts) == 0 {
		return "no limit changed"
	}
	return strings.Join(parts, ", ")
}

// LimitString prints a limit, 0 being unlimited.
func LimitString(n int) string {
	if n == 0 {
		return "unlimited"
	}
	return strconv.Itoa(n)
}
