package objective

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/sundialhq/sundial/store"
)

// Label is the job label that states a job's objective.
const Label = "sundial.io/trigger-lag-objective"

// Objective is a parsed label: Percentile % of the attempts due in Window
// must start within Lag of their due time.
type Objective struct {
	Percentile float64
	Lag        time.Duration
	Window     time.Duration
	// Text is the label as written.
	Text string
}

var (
	objectiveForm = regexp.MustCompile(`^\s*p(\d+(?:\.\d+)?)\s*<=\s*(\S+?)\s*(?:/|\s+over\s+)\s*(\S+)\s*$`)
	spanForm      = regexp.MustCompile(`^(\d+(?:\.\d+)?)(ms|s|min|m|h|d)$`)
	spanUnits     = map[string]time.Duration{"ms": time.Millisecond, "s": time.Second, "min": time.Minute, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour}
)

// Parse reads a label's value. Its error names the label, the text and
// what is wrong, for the page to show instead of a figure.
func Parse(text string) (Objective, error) {
	m := objectiveForm.FindStringSubmatch(text)
	if m == nil {
		return Objective{}, fmt.Errorf(`%s %q: must read like "p99 <= 2s over 7d"`, Label, text)
	}
	var errs []error
	pct, err := strconv.ParseFloat(m[1], 64)
	if err != nil || pct <= 0 || pct >= 100 {
		errs = append(errs, fmt.Errorf("%s %q: the percentile %s must be above 0 and below 100", Label, text, m[1]))
	}
	lag, ok := span(m[2])
	if !ok {
		errs = append(errs, fmt.Errorf("%s %q: the lag %q must be a positive duration (250ms, 2s, 1m, 1h)", Label, text, m[2]))
	}
	window, ok := span(m[3])
	if !ok {
		errs = append(errs, fmt.Errorf("%s %q: the window %q must be a positive duration (1h, 7d)", Label, text, m[3]))
	}
	if err := errors.Join(errs...); err != nil {
		return Objective{}, err
	}
	return Objective{Percentile: pct, Lag: lag, Window: window, Text: text}, nil
}

// span reads "250ms", "2s", "1.5m", "1h", "7d": positive, at most 10
// years, at millisecond precision.
func span(text string) (time.Duration, bool) {
	m := spanForm.FindStringSubmatch(text)
	if m == nil {
		return 0, false
	}
	n, err := strconv.ParseFloat(m[1], 64)
	limit := float64(10*365*24*time.Hour) / float64(spanUnits[m[2]])
	if err != nil || n <= 0 || n > limit {
		return 0, false
	}
	d := time.Duration(n * float64(spanUnits[m[2]])).Truncate(time.Millisecond)
	return d, d > 0
}

// Causes of a late attempt: where it lost the most time.
const (
	CauseDispatcher = "dispatcher"
	CauseConsumer   = "consumer"
	CauseRunner     = "runner"
	CauseUnknown    = "unknown"
)

// Cause is where a late attempt lost the most time, and how much.
type Cause struct {
	Where string
	Lost  time.Duration
}

// CauseOf names the step of r's timeline (due -> dispatched -> received
// -> started) that took longest, of those whose both ends are known; an
// attempt not started waits in the first step it has not passed, until
// now.
func CauseOf(r store.RunRecord, now time.Time) Cause {
	steps := []time.Time{dueOf(r), r.Dispatched, r.Received, r.Started}
	if r.Started.IsZero() {
		if open := slices.IndexFunc(steps[1:], time.Time.IsZero) + 1; open > 0 {
			steps[open] = now
			clear(steps[open+1:])
		}
	}
	best := Cause{Where: CauseUnknown}
	for i, where := range []string{CauseDispatcher, CauseConsumer, CauseRunner} {
		from, to := steps[i], steps[i+1]
		if from.IsZero() || to.IsZero() {
			continue
		}
		if lost := max(to.Sub(from), 0); best.Where == CauseUnknown || lost > best.Lost {
			best = Cause{Where: where, Lost: lost}
		}
	}
	return best
}

// Late is one attempt over its objective's lag.
type Late struct {
	Record store.RunRecord
	Lag    time.Duration
	Cause  Cause
}

// Assessment is a job measured against its objective.
type Assessment struct {
	// Counted is the attempts due in the window that started or wait
	// past their due time.
	Counted int
	// Late holds the counted attempts whose lag is over the objective's,
	// worst first (then by due time, run id, attempt).
	Late []Late
	// Budget is how many may be late; Left the share of it not spent.
	Budget, Left float64
	Met          bool
	// P99 is the nearest-rank 99th percentile of the counted lags.
	P99 time.Duration
	// Causes counts the late attempts by Cause.Where.
	Causes map[string]int
}

// Assess measures records (any order) against o over the attempts due in
// [now - o.Window, now].
func Assess(o Objective, records []store.RunRecord, now time.Time) Assessment {
	from := now.Add(-o.Window)
	a := Assessment{Causes: map[string]int{}}
	var lags []time.Duration
	for _, r := range records {
		due := dueOf(r)
		if due.Before(from) || due.After(now) {
			continue
		}
		lag, ok := lagOf(r, now)
		if !ok {
			continue
		}
		lags = append(lags, lag)
		if lag > o.Lag {
			c := CauseOf(r, now)
			a.Late = append(a.Late, Late{Record: r, Lag: lag, Cause: c})
			a.Causes[c.Where]++
		}
	}
	slices.SortFunc(a.Late, func(x, y Late) int {
		return cmp.Or(cmp.Compare(y.Lag, x.Lag), dueOf(x.Record).Compare(dueOf(y.Record)),
			cmp.Compare(x.Record.RunID, y.Record.RunID), cmp.Compare(x.Record.Attempt, y.Record.Attempt))
	})
	a.Counted = len(lags)
	a.Budget = (100 - o.Percentile) / 100 * float64(a.Counted)
	a.Left = 1
	if a.Budget > 0 {
		a.Left = 1 - float64(len(a.Late))/a.Budget
	}
	a.Met = float64(len(a.Late)) <= a.Budget
	if len(lags) > 0 {
		slices.Sort(lags)
		rank := (99*len(lags) + 99) / 100 // ceil(0.99 n)
		a.P99 = lags[max(rank, 1)-1]
	}
	return a
}

// dueOf is when the attempt was due: its own due time, else the run's.
func dueOf(r store.RunRecord) time.Time { return cmp.Or(r.AttemptDue, r.Due) }

// lagOf is r's start lag, or its wait so far while it is scheduled or
// running without a start; ok is false for an attempt that ended without
// starting or is not due yet.
func lagOf(r store.RunRecord, now time.Time) (time.Duration, bool) {
	due := dueOf(r)
	switch {
	case !r.Started.IsZero():
		return max(r.Started.Sub(due), 0), true
	case (r.State == store.StateScheduled || r.State == store.StateRunning) && !due.After(now):
		return now.Sub(due), true
	}
	return 0, false
}
