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

// chaosView is the kills table of a chaos run.
type chaosView struct {
	// System is the system measured.
	System string
	*ChaosInfo
	Kills []chaosKillRow
	// ThresholdMs is the recovery threshold of the first kill; 0 without
	// kills.
	ThresholdMs float64
	// SettleSeconds is settleSeconds, for the text.
	SettleSeconds int
}

// chaosKillRow is one kill of a chaos run, numbered from 1.
type chaosKillRow struct {
	N int
	CrashEvent
	// AtSeconds: the kill's time since the start of the window.
	AtSeconds float64
	// DownSeconds: from the kill until the restart; Down false when the
	// target was not restarted.
	Down        bool
	DownSeconds float64
	Recovery    string
	// Settled: the kill's SettledSeconds, written out.
	Settled string
}

// chaosSummary builds the kills table of s's chaos run in the window [from,
// to).
func chaosSummary(s System, from, to time.Time) *chaosView {
	v := &chaosView{System: s.Name, ChaosInfo: s.Chaos, SettleSeconds: settleSeconds}
	for i, e := range s.Crash {
		row := chaosKillRow{N: i + 1, CrashEvent: e, AtSeconds: e.KilledAt.Sub(from).Seconds(), Recovery: chaosRecovery(e, to), Settled: settledText(e, to)}
		if !e.Restarted.IsZero() {
			row.Down, row.DownSeconds = true, e.Restarted.Sub(e.KilledAt).Seconds()
		}
		v.Kills = append(v.Kills, row)
	}
	if len(s.Crash) > 0 {
		v.ThresholdMs = s.Crash[0].ThresholdMs
	}
	return v
}

// chaosRecovery says how long after the kill e the latency recovered, for
// a window ending at to.
func chaosRecovery(e CrashEvent, to time.Time) string {
	switch {
	case e.Error != "":
		return "-"
	case !e.KilledAt.Before(to):
		return "after the window: not measured"
	case e.RecoverySeconds > 0 && !e.KilledAt.Add(time.Duration(e.RecoverySeconds*float64(time.Second))).Before(to.Add(-time.Second)):
		// Slow up to the window's last second: a lower bound.
		return fmt.Sprintf("≥ %.1f s (slow until the end of the window)", e.RecoverySeconds)
	case e.RecoverySeconds >= 0:
		return fmt.Sprintf("%.1f s", e.RecoverySeconds)
	}
	return "not recovered before the next kill"
}

// settledText says how long after the kill e the latency settled, for a
// window ending at to.
func settledText(e CrashEvent, to time.Time) string {
	switch {
	case e.Error != "":
		return "-"
	case !e.KilledAt.Before(to):
		return "after the window: not measured"
	case e.SettledSeconds == nil:
		return "not measured"
	case *e.SettledSeconds >= 0:
		return fmt.Sprintf("%.1f s", *e.SettledSeconds)
	}
	return "not before the next kill"
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
