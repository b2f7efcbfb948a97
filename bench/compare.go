package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
)

// ReadReport reads the report.json of a results folder.
func ReadReport(dir string) (*Report, error) {
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		return nil, fmt.Errorf("read report: %w", err)
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("read report %s: %w", dir, err)
	}
	if len(r.Systems) == 0 {
		return nil, fmt.Errorf("read report %s: no system measured", dir)
	}
	return &r, nil
}

// ComparedFigure is one key figure of two runs of the same workload: A the
// reference, B the run compared with it.
type ComparedFigure struct {
	Name string
	A, B float64
	// HigherIsBetter: the sustained rate; the latencies and the counts of
	// loss and duplicates are better lower.
	HigherIsBetter bool
}

// Ratio is B / A; NaN when A is 0 (a count of zero losses, say).
func (f ComparedFigure) Ratio() float64 {
	if f.A == 0 {
		return math.NaN()
	}
	return f.B / f.A
}

// Worse is by how much B is worse than A, as a fraction of A (0.05 is 5 %
// worse); negative when B is better, NaN when A is 0.
func (f ComparedFigure) Worse() float64 {
	r := f.Ratio()
	if f.HigherIsBetter {
		return 1 - r
	}
	return r - 1
}

// CompareFigures are the key figures of the first system (Sundial) of two
// reports.
func CompareFigures(a, b *Report) []ComparedFigure {
	sa, sb := a.Systems[0], b.Systems[0]
	dispatchP95 := func(s System) float64 {
		if s.Dispatch == nil {
			return 0
		}
		return s.Dispatch.P95Ms
	}
	cpu := func(s System, part func(CPUPerRun) float64) float64 {
		if s.CPUPerRun == nil {
			return math.NaN()
		}
		return part(*s.CPUPerRun)
	}
	machine := func(c CPUPerRun) float64 { return c.MachineMs }
	sundial := func(c CPUPerRun) float64 { return c.SundialMs }
	return []ComparedFigure{
		{Name: "sustained triggers/s", A: sa.SustainedPerSec, B: sb.SustainedPerSec, HigherIsBetter: true},
		{Name: "trigger p50 (ms)", A: sa.Trigger.P50Ms, B: sb.Trigger.P50Ms},
		{Name: "trigger p95 (ms)", A: sa.Trigger.P95Ms, B: sb.Trigger.P95Ms},
		{Name: "trigger p99 (ms)", A: sa.Trigger.P99Ms, B: sb.Trigger.P99Ms},
		{Name: "dispatch p95 (ms)", A: dispatchP95(sa), B: dispatchP95(sb)},
		{Name: "lost", A: float64(sa.Counts.Lost), B: float64(sb.Counts.Lost)},
		{Name: "duplicate executions", A: float64(sa.Counts.DuplicateExecutions), B: float64(sb.Counts.DuplicateExecutions)},
		{Name: "duplicate effects", A: float64(sa.Effects.DuplicateEffects), B: float64(sb.Effects.DuplicateEffects)},
		{Name: "machine CPU per run (ms)", A: cpu(sa, machine), B: cpu(sb, machine)},
		{Name: "Sundial's CPU per run (ms)", A: cpu(sa, sundial), B: cpu(sb, sundial)},
	}
}

// Compare writes the key figures of two reports side by side as a
// Markdown table, with B / A and by how much B is worse than A.
func Compare(w io.Writer, dirA string, a *Report, dirB string, b *Report) {
	p := func(format string, args ...any) { _, _ = fmt.Fprintf(w, format, args...) }
	for _, r := range []struct {
		name, dir string
		rep       *Report
	}{{"A", dirA, a}, {"B", dirB, b}} {
		p("- **%s** `%s`: %s, %s to %s; %s\n", r.name, r.dir, r.rep.Scenario,
			r.rep.StartedAt.Format("2006-01-02 15:04:05"), r.rep.FinishedAt.Format("15:04:05"), r.rep.Config.String())
		if r.rep.APIWatch != nil {
			p("  - API watch: %d messages received, %d during the window (%.0f/s)\n",
				r.rep.APIWatch.Messages, r.rep.APIWatch.InWindow, r.rep.APIWatch.InWindowPerSec)
		}
	}
	if a.Workload.Jobs != b.Workload.Jobs || a.Workload.PlannedRate != b.Workload.PlannedRate ||
		a.Workload.WindowTo.Sub(a.Workload.WindowFrom) != b.Workload.WindowTo.Sub(b.Workload.WindowFrom) {
		p("- **The workloads differ** (jobs %d / %d, planned %.0f / %.0f triggers/s, windows %s / %s): the figures do not compare like for like.\n",
			a.Workload.Jobs, b.Workload.Jobs, a.Workload.PlannedRate, b.Workload.PlannedRate,
			a.Workload.WindowTo.Sub(a.Workload.WindowFrom), b.Workload.WindowTo.Sub(b.Workload.WindowFrom))
	}
	p("\n| figure | A | B | B / A | B worse by |\n|---|---|---|---|---|\n")
	for _, f := range CompareFigures(a, b) {
		ratio, worse := "–", "–"
		if !math.IsNaN(f.Ratio()) {
			ratio = strconv.FormatFloat(f.Ratio(), 'f', 3, 64)
			worse = fmt.Sprintf("%+.1f %%", 100*f.Worse())
		}
		p("| %s | %s | %s | %s | %s |\n", f.Name, figure(f.A), figure(f.B), ratio, worse)
	}
}

// figure prints a count as an integer and anything else with one decimal.
func figure(v float64) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) < 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}
