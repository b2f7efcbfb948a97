package bench

import (
	"fmt"
	"slices"
	"time"
)

// ChaosInfo is what a chaos run planned and what its supervisor saw.
type ChaosInfo struct {
	Seed            uint64        `json:"seed"`
	EverySeconds    float64       `json:"every_seconds"`
	ProcessDownSecs float64       `json:"process_down_seconds"`
	BackendDownSecs float64       `json:"backend_down_seconds"`
	Plan            []PlannedKill `json:"plan"`
	// ProcessKills and BackendKills count the kills that happened (the
	// target was killed and started again).
	ProcessKills int      `json:"process_kills"`
	BackendKills []string `json:"backend_kills"`
	// Exits are subprocesses that ended on their own (not killed by the
	// bench), each restarted by the supervisor.
	Exits []ProcessExit `json:"process_exits,omitempty"`
}

// countKills fills ProcessKills and BackendKills from the events: a kill
// counts when it happened and its target was started again.
func (c *ChaosInfo) countKills(events []CrashEvent) {
	c.ProcessKills, c.BackendKills = 0, nil
	for _, e := range events {
		if e.Error != "" || e.Restarted.IsZero() {
			continue
		}
		if e.Kind == "backend" {
			c.BackendKills = append(c.BackendKills, e.Process)
		} else {
			c.ProcessKills++
		}
	}
}

// chaosMarkdown writes the kills table of a chaos run.
func chaosMarkdown(p func(string, ...any), s System, from, to time.Time) {
	c := s.Chaos
	p("\n## Chaos (%s): %d process kills, backends killed: %v (seed %d)\n\n", s.Name, c.ProcessKills, c.BackendKills, c.Seed)
	p("Every %.0f s a random dispatcher, runner or DAG engine is killed with SIGKILL and started again %.0f s later; each backend once, left down %.0f s, then started (the restart waits until it serves requests).\n\n",
		c.EverySeconds, c.ProcessDownSecs, c.BackendDownSecs)
	p("| # | killed at (s into the window) | target | down for | recovery | note |\n|---|---|---|---|---|---|\n")
	for i, e := range s.Crash {
		at := fmt.Sprintf("%.1f", e.KilledAt.Sub(from).Seconds())
		down := "-"
		if !e.Restarted.IsZero() {
			down = fmt.Sprintf("%.1f s", e.Restarted.Sub(e.KilledAt).Seconds())
		}
		rec := "not recovered before the next kill"
		switch {
		case e.Error != "":
			rec = "-"
		case !e.KilledAt.Before(to):
			rec = "after the window: not measured"
		case e.RecoverySeconds > 0 && !e.KilledAt.Add(time.Duration(e.RecoverySeconds*float64(time.Second))).Before(to.Add(-time.Second)):
			// Slow up to the window's last second: a lower bound.
			rec = fmt.Sprintf("≥ %.1f s (slow until the end of the window)", e.RecoverySeconds)
		case e.RecoverySeconds >= 0:
			rec = fmt.Sprintf("%.1f s", e.RecoverySeconds)
		}
		target := e.Process
		if e.Kind == "backend" {
			target = "**" + e.Process + "** (backend)"
		}
		p("| %d | %s | %s | %s | %s | %s |\n", i+1, at, target, down, rec, e.Error)
	}
	if len(s.Crash) > 0 {
		p("\nRecovery: from the kill until the per-second p99 trigger latency of the runs due after it is back under %.0f ms for good (up to the next kill).\n", s.Crash[0].ThresholdMs)
	}
	if len(c.Exits) > 0 {
		p("\nSubprocesses that exited on their own (restarted by the supervisor):\n\n")
		for _, e := range c.Exits {
			p("- %s at %s: %s\n", e.Process, e.At.Format("15:04:05.000"), e.Err)
		}
	}
}

// chaosTargets are the chaos scenario's targets: nothing lost (runs and
// DAG runs, counted after the drain), no duplicate effect, and the run
// being the one asked for (process kills, one restart of every backend).
func chaosTargets(cfg Config, s System, add func(name, want string, v float64, met bool)) {
	add("lost runs (after the drain)", "0", float64(s.Counts.Lost), s.Counts.Lost == 0)
	if s.Dags != nil {
		add("lost DAG runs (after the drain)", "0", float64(s.Dags.Lost), s.Dags.Lost == 0)
		add("failed DAG runs", "0", float64(s.Dags.Failed), s.Dags.Failed == 0)
	}
	add("duplicate effects", "0", float64(s.Effects.DuplicateEffects), s.Effects.DuplicateEffects == 0)
	if s.Chaos == nil {
		return
	}
	want := 0
	for _, k := range s.Chaos.Plan {
		if !k.Backend {
			want++
		}
	}
	add("process kills", fmt.Sprintf("≥ %d", want), float64(s.Chaos.ProcessKills), s.Chaos.ProcessKills >= want)
	missing := 0
	backends := cfg.chaosBackends()
	for _, b := range backends {
		if !slices.Contains(s.Chaos.BackendKills, b) {
			missing++
		}
	}
	add(fmt.Sprintf("backends killed and restarted (%v)", backends), fmt.Sprintf("%d", len(backends)),
		float64(len(backends)-missing), missing == 0)
}
