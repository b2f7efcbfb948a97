package bench

import (
	_ "embed"
	"fmt"
	"io"
	"strings"
	"text/template"
	"time"
)

// summaryText is the layout of summary.md: one named template per section,
// "summary" the whole.
//
//go:embed summary.md.tmpl
var summaryText string

// summaryTemplate lays out the summary from a summaryView. Its functions
// only format a value; what a figure is (a ratio, a verdict, a row) is
// computed in Go when the view is built.
var summaryTemplate = template.Must(template.New("summary.md.tmpl").Funcs(template.FuncMap{
	"rfc3339":       func(t time.Time) string { return t.Format(time.RFC3339) },
	"rfc3339Nano":   func(t time.Time) string { return t.Format(time.RFC3339Nano) },
	"clock":         func(t time.Time) string { return t.Format("15:04:05") },
	"clockMillis":   func(t time.Time) string { return t.Format("15:04:05.000") },
	"commaList":     func(s []string) string { return strings.Join(s, ",") },
	"gib":           func(bytes uint64) string { return fmt.Sprintf("%.1f GiB", float64(bytes)/(1<<30)) },
	"millis":        func(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond },
	"percent":       func(share float64) string { return fmt.Sprintf("%.0f%%", 100*share) },
	"percentTenths": func(share float64) string { return fmt.Sprintf("%.1f%%", 100*share) },
	"metOrNot":      metOrNot,
	"spread":        spreadText,
}).Parse(summaryText))

// spreadText shows a baseline's samples and their spread, "–" when it was
// measured once (reports before stable baselines).
func spreadText(s Spread) string {
	if len(s.Samples) == 0 {
		return "–"
	}
	vals := make([]string, len(s.Samples))
	for i, v := range s.Samples {
		vals[i] = fmt.Sprintf("%.0f", v)
	}
	text := fmt.Sprintf("%s (spread %.0f%%)", strings.Join(vals, ", "), 100*s.Relative)
	if len(s.Warmup) == 0 {
		return text
	}
	warm := make([]string, len(s.Warmup))
	for i, v := range s.Warmup {
		warm[i] = fmt.Sprintf("%.0f", v)
	}
	state := "settled"
	if !s.Settled {
		state = "not settled"
	}
	return fmt.Sprintf("%s after a warm-up of %s (%s)", text, strings.Join(warm, ", "), state)
}

// summaryView is what the summary shows of a report.
type summaryView struct {
	Report *Report
	// Herd: the workload is a herd due at one instant.
	Herd bool
	// Window is the length of the measured window.
	Window    time.Duration
	Baselines baselinesView
	// Rows of the results table, a cell per system.
	Rows     []resultRow
	Systems  []systemView
	Capacity *capacityView
	Plots    []reportPlot
}

// baselinesView is the baselines with the R of the L formula.
type baselinesView struct {
	Baselines
	// RForL is R plain / 2, the lease calls of the least work a run needs.
	RForL float64
}

// resultRow is one row of the results table.
type resultRow struct {
	Name  string
	Cells []string
}

// systemView is what the summary shows of one system, section by section;
// a section without data is nil.
type systemView struct {
	Name string
	Dags *DagCounts
	// Crashes are the kills listed under the results table (a chaos run's
	// are a table of their own, Chaos).
	Crashes []crashLine
	// Notes are the system's notes (a chaos run's too: lost runs and
	// duplicates are named there).
	Notes            []string
	Chaos            *chaosView
	CPU              *cpuView
	Work             *workView
	Profiles         *profilesView
	Registration     *registrationView
	DispatcherMemory *memoryView
	RunnerMemory     *memoryView
}

// workView is the backend work per run of one system, by component.
type workView struct {
	System string
	Rows   []ComponentWork
}

// crashLine is one kill of a crash run.
type crashLine struct {
	CrashEvent
	// Recovery says when the latency recovered, or that it did not.
	Recovery string
}

func metOrNot(met bool) string {
	if met {
		return "met"
	}
	return "**not met**"
}

// Markdown writes the human-readable summary. Like a print to a terminal,
// a failed write is not reported; Write reports it.
func (r *Report) Markdown(w io.Writer) {
	_ = r.writeMarkdown(w)
}

// writeMarkdown writes the summary, laid out by summary.md.tmpl.
func (r *Report) writeMarkdown(w io.Writer) error {
	if err := summaryTemplate.ExecuteTemplate(w, "summary", r.summary()); err != nil {
		return fmt.Errorf("summary: %w", err)
	}
	return nil
}

// summary builds the view of the report.
func (r *Report) summary() summaryView {
	v := summaryView{Report: r, Herd: !r.Workload.HerdAt.IsZero(), Window: r.Workload.WindowTo.Sub(r.Workload.WindowFrom), Plots: r.plots(),
		Baselines: baselinesView{Baselines: r.Baselines, RForL: r.Baselines.R.PlainCallsPerSec / 2}}
	v.Rows = resultRows(r.Systems, v.Herd)
	for _, s := range r.Systems {
		v.Systems = append(v.Systems, systemSummary(s, r.Workload.WindowFrom, r.Workload.WindowTo))
	}
	if r.Capacity != nil {
		v.Capacity = capacitySummary(r.Capacity, r.Baselines)
	}
	return v
}

// systemSummary builds the sections of one system; from and to are the
// window.
func systemSummary(s System, from, to time.Time) systemView {
	v := systemView{Name: s.Name, Dags: s.Dags, Notes: s.Notes}
	if s.Chaos != nil {
		v.Chaos = chaosSummary(s, from, to)
	} else {
		for _, c := range s.Crash {
			v.Crashes = append(v.Crashes, crashLine{CrashEvent: c, Recovery: crashRecovery(c)})
		}
	}
	if s.CPU != nil {
		v.CPU = &cpuView{System: s.Name, Table: cpuTableSummary(s.CPU)}
	}
	if len(s.Work) > 0 {
		v.Work = &workView{System: s.Name, Rows: s.Work}
	}
	if len(s.Profiles) > 0 {
		v.Profiles = profilesSummary(s.Name, s.Profiles)
	}
	if s.Registration != nil {
		v.Registration = registrationSummary(s.Name, s.Registration)
	}
	if s.DispatcherMemory != nil {
		v.DispatcherMemory = memorySummary("Dispatcher", s.Name, s.DispatcherMemory)
	}
	if s.RunnerMemory != nil {
		v.RunnerMemory = memorySummary("Runner", s.Name, s.RunnerMemory)
	}
	return v
}

// crashRecovery says how long after a crash run's kill the latency
// recovered.
func crashRecovery(c CrashEvent) string {
	if c.RecoverySeconds < 0 {
		return "did not recover in the window"
	}
	s := fmt.Sprintf("recovered %.1f s after the kill", c.RecoverySeconds)
	if c.SettledSeconds != nil && *c.SettledSeconds >= 0 && *c.SettledSeconds < c.RecoverySeconds {
		s += fmt.Sprintf(", settled %.1f s after it (%d s in a row under the bound)", *c.SettledSeconds, settleSeconds)
	}
	return s
}

// resultRows are the rows of the results table, a cell per system; herd
// adds the herd's drain.
func resultRows(systems []System, herd bool) []resultRow {
	var rows []resultRow
	row := func(name string, f func(s System) string) {
		cells := make([]string, len(systems))
		for i, s := range systems {
			cells[i] = f(s)
		}
		rows = append(rows, resultRow{Name: name, Cells: cells})
	}
	ms := func(v float64) string { return fmt.Sprintf("%.1f ms", v) }
	row("trigger latency p50", func(s System) string { return ms(s.Trigger.P50Ms) })
	row("trigger latency p95", func(s System) string { return ms(s.Trigger.P95Ms) })
	row("trigger latency p99", func(s System) string { return ms(s.Trigger.P99Ms) })
	row("trigger latency p99.9", func(s System) string { return ms(s.Trigger.P999Ms) })
	row("trigger latency max", func(s System) string { return ms(s.Trigger.MaxMs) })
	row("runs measured", func(s System) string { return fmt.Sprint(s.Trigger.Count) })
	row("dispatch latency p50 / p95 / p99", func(s System) string {
		if s.Dispatch == nil {
			return "n/a"
		}
		return fmt.Sprintf("%.1f / %.1f / %.1f ms", s.Dispatch.P50Ms, s.Dispatch.P95Ms, s.Dispatch.P99Ms)
	})
	row("sustained triggers/s", func(s System) string { return fmt.Sprintf("%.0f", s.SustainedPerSec) })
	row("fraction of B", func(s System) string { return fmt.Sprintf("%.0f%%", 100*s.FractionOfB) })
	row("fraction of L", func(s System) string { return fmt.Sprintf("%.0f%%", 100*s.FractionOfL) })
	row("CPU per run: machine (Sundial / backends / bench)", func(s System) string {
		if s.CPUPerRun == nil || s.CPUPerRun.RunsPerSec == 0 {
			return "n/a"
		}
		c := s.CPUPerRun
		return fmt.Sprintf("%.2f ms (%.2f / %.2f / %.2f)", c.MachineMs, c.SundialMs, c.BackendsMs, c.BenchMs)
	})
	row("expected runs in window", func(s System) string { return fmt.Sprint(s.Counts.Expected) })
	row("lost (of which dispatched, not started)", func(s System) string {
		return fmt.Sprintf("%d (%d)", s.Counts.Lost, s.Counts.LostDispatched)
	})
	row("duplicate executions", func(s System) string { return fmt.Sprint(s.Counts.DuplicateExecutions) })
	row("duplicate effects (of which within one attempt)", func(s System) string {
		return fmt.Sprintf("%d (%d)", s.Effects.DuplicateEffects, s.Effects.DuplicateSameAttempt)
	})
	row("redeliveries answered as replays (keys)", func(s System) string {
		return fmt.Sprintf("%d (%d)", s.Effects.Redeliveries, s.Effects.RedeliveredKeys)
	})
	row("stale fencing tokens at the downstream", func(s System) string { return fmt.Sprint(s.Effects.StaleFencing) })
	row("unexpected runs / early starts", func(s System) string {
		return fmt.Sprintf("%d / %d", s.Counts.Unexpected, s.Counts.EarlyStarts)
	})
	row("duplicate dispatches", func(s System) string { return fmt.Sprint(s.Counts.DuplicateDispatches) })
	if herd {
		row("herd drained in", func(s System) string {
			if s.HerdDrainSeconds == 0 {
				return "not drained"
			}
			return fmt.Sprintf("%.2f s (%.0f runs/s)", s.HerdDrainSeconds, s.HerdDrainPerSec)
		})
		row("most runs started in one second", func(s System) string {
			if s.HerdPeakStartsPerSec == 0 {
				return "-"
			}
			return fmt.Sprint(s.HerdPeakStartsPerSec)
		})
	}
	return rows
}
