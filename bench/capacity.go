package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/sundialhq/sundial/loadgen"
)

// CapacityPeriod is the interval of the jobs of a capacity step: a step at
// r triggers/s defines r × 5 interval jobs. Short enough that a step
// registers few jobs (the registry is slower than the dispatcher), long
// enough that each job fires several times in a step.
const CapacityPeriod = 5 * time.Second

// CapacityP95 is the trigger p95 a step may have and still pass.
const CapacityP95 = time.Second

// CapacityStep is one step of the capacity search: the pipeline offered
// Rate triggers/s for a window.
type CapacityStep struct {
	// Rate is the planned triggers/s of the step.
	Rate float64 `json:"rate"`
	// Jobs is the number of interval jobs the step defined.
	Jobs int `json:"jobs"`
	// Trigger is the trigger latency of the runs due in the step's window.
	Trigger Latency `json:"trigger_latency"`
	// SustainedPerSec: runs of the window that started in the window, per
	// second.
	SustainedPerSec float64 `json:"sustained_triggers_per_sec"`
	// Expected and Lost: runs due in the window, and those of them that had
	// not started by the end of the step's drain.
	Expected int64 `json:"expected"`
	Lost     int64 `json:"lost"`
	// Pass: at least one run measured, none lost, and p95 ≤ CapacityP95.
	Pass bool `json:"pass"`
}

// passes is the rule a step is judged by.
func (s CapacityStep) passes() bool {
	return s.Trigger.Count > 0 && s.Lost == 0 && s.Trigger.P95Ms <= float64(CapacityP95.Milliseconds())
}

// CapacitySearch finds the highest rate whose step passes: it doubles the
// rate from Start while steps pass (up to Max), halves it while they fail
// and nothing passed yet, then bisects between the highest rate that
// passed and the lowest that failed until they are within Resolution of
// each other. It is pure: the measurement is a function, so the search is
// tested without a pipeline.
type CapacitySearch struct {
	// Start is the first rate offered, triggers/s. Required.
	Start float64
	// Max is the highest rate offered; the search stops when a step at Max
	// passes. Required, at least Start.
	Max float64
	// Resolution: bisection stops when lowest failing / highest passing ≤
	// 1 + Resolution. Default 0.1.
	Resolution float64
	// MaxSteps bounds the number of steps. Default 10.
	MaxSteps int
}

// CapacityResult is what the search found.
type CapacityResult struct {
	Steps []CapacityStep `json:"steps"`
	// Highest is the highest rate that passed; 0 when none did.
	Highest float64 `json:"highest_passing_rate"`
	// LowestFailing is the lowest rate that failed; 0 when none did (the
	// search reached Max, or ran out of steps, before a step failed).
	LowestFailing float64 `json:"lowest_failing_rate"`
	// Stopped says why the search ended.
	Stopped string `json:"stopped"`
	// FractionOfL and FractionOfB: Highest / L and Highest / B.
	FractionOfL float64 `json:"fraction_of_l"`
	FractionOfB float64 `json:"fraction_of_b"`
	// StepSeconds and DrainSeconds: each step's window and drain.
	StepSeconds  float64 `json:"step_seconds"`
	DrainSeconds float64 `json:"drain_seconds"`
}

// Validate reports every bad field, after defaults.
func (s CapacitySearch) Validate() error {
	s = s.withDefaults()
	var errs []error
	if !(s.Start >= 1) {
		errs = append(errs, fmt.Errorf("capacity: start rate %v: must be at least 1/s", s.Start))
	}
	if !(s.Max >= s.Start) {
		errs = append(errs, fmt.Errorf("capacity: max rate %v: must be at least the start rate %v", s.Max, s.Start))
	}
	if !(s.Resolution > 0 && s.Resolution < 1) {
		errs = append(errs, fmt.Errorf("capacity: resolution %v: must be in (0, 1)", s.Resolution))
	}
	if s.MaxSteps < 1 {
		errs = append(errs, fmt.Errorf("capacity: max steps %d: must be at least 1", s.MaxSteps))
	}
	return errors.Join(errs...)
}

func (s CapacitySearch) withDefaults() CapacitySearch {
	if s.Resolution == 0 {
		s.Resolution = 0.1
	}
	if s.MaxSteps == 0 {
		s.MaxSteps = 10
	}
	return s
}

// Run runs the search, calling measure for each step's rate (a whole
// number of triggers/s). measure fills in everything but Pass. An error
// from measure ends the search with the steps so far.
func (s CapacitySearch) Run(ctx context.Context, measure func(ctx context.Context, rate float64) (CapacityStep, error)) (CapacityResult, error) {
	s = s.withDefaults()
	var res CapacityResult
	if err := s.Validate(); err != nil {
		return res, err
	}
	rate := math.Round(s.Start)
	for {
		if len(res.Steps) == s.MaxSteps {
			res.Stopped = fmt.Sprintf("%d steps, the most allowed", s.MaxSteps)
			return res, nil
		}
		step, err := measure(ctx, rate)
		if err != nil {
			return res, fmt.Errorf("capacity step %d at %.0f/s: %w", len(res.Steps)+1, rate, err)
		}
		step.Rate = rate
		step.Pass = step.passes()
		res.Steps = append(res.Steps, step)
		if step.Pass {
			res.Highest = max(res.Highest, rate)
		} else if res.LowestFailing == 0 || rate < res.LowestFailing {
			res.LowestFailing = rate
		}
		var next float64
		switch {
		case res.LowestFailing == 0: // nothing failed yet: go up
			if res.Highest >= s.Max {
				res.Stopped = fmt.Sprintf("the max rate %.0f/s passed", s.Max)
				return res, nil
			}
			next = min(2*res.Highest, math.Round(s.Max))
		case res.Highest == 0: // nothing passed yet: go down
			next = math.Round(res.LowestFailing / 2)
			if next < 1 {
				res.Stopped = "even 1/s failed"
				return res, nil
			}
		default:
			if res.LowestFailing <= res.Highest*(1+s.Resolution) {
				res.Stopped = fmt.Sprintf("the highest passing and the lowest failing rate are within %.0f%%", 100*s.Resolution)
				return res, nil
			}
			next = math.Round((res.Highest + res.LowestFailing) / 2)
		}
		if next == res.Highest || next == res.LowestFailing {
			res.Stopped = "the rates are 1/s apart"
			return res, nil
		}
		rate = next
	}
}

// capacity runs the capacity search: each step is a steady run of its own
// job set through a fresh pipeline in a namespace of its own
// (Namespace.Step), deleted at the end of the step so that it adds nothing
// to the next.
// It returns the highest passing step (or the last step, when none passed)
// as the report's system.
func (b *Bench) capacity(ctx context.Context, cfg *Config, ns Namespace, bl Baselines) (System, WorkloadInfo, *CapacityResult, error) {
	if (cfg.Processes || cfg.DispatcherProcess) && cfg.Binary == "" {
		tmp, err := os.MkdirTemp("", "sundial-bench-")
		if err != nil {
			return System{}, WorkloadInfo{}, nil, err
		}
		b.say("building the sundial binary once, for every step")
		if cfg.Binary, err = BuildBinary(ctx, tmp); err != nil {
			return System{}, WorkloadInfo{}, nil, err
		}
	}
	search := CapacitySearch{Start: cfg.Rate, Max: cmp.Or(cfg.MaxRate, math.Round(bl.L)), MaxSteps: cfg.CapacitySteps}
	if search.Max < search.Start {
		return System{}, WorkloadInfo{}, nil, fmt.Errorf("capacity: the first rate %.0f/s is above L = %.0f/s; lower --rate or set --max-rate", search.Start, bl.L)
	}
	type stepRun struct {
		sys System
		wl  WorkloadInfo
	}
	var runs []stepRun
	res, err := search.Run(ctx, func(ctx context.Context, rate float64) (CapacityStep, error) {
		sc := *cfg
		sc.Rate = rate
		sc.Jobs = max(1, int(math.Ceil(rate*CapacityPeriod.Seconds())))
		sc.Mix = loadgen.Mix{Interval: 1}
		sc.jobPrefix = fmt.Sprintf("%s-c%d", ns.ID, len(runs)+1)
		b.say("capacity step %d: %.0f triggers/s, %d interval jobs every %s, window %s", len(runs)+1, rate, sc.Jobs, CapacityPeriod, sc.Duration)
		// A failing step leaves runs on its topics and due entries in its
		// keyspace, which would run first in the next step and fail it
		// too: each step has a namespace of its own.
		sns := ns.Step(len(runs) + 1)
		if err := b.stepNamespace(ctx, cfg, sns); err != nil {
			return CapacityStep{}, err
		}
		if !cfg.Keep {
			defer b.teardown(ctx, sns)
		}
		sys, wl, err := b.runSundial(ctx, &sc, sns)
		if err != nil {
			return CapacityStep{}, err
		}
		cfg.Pipeline = sc.Pipeline
		runs = append(runs, stepRun{sys: sys, wl: wl})
		st := CapacityStep{Jobs: sc.Jobs, Trigger: sys.Trigger, SustainedPerSec: sys.SustainedPerSec,
			Expected: sys.Counts.Expected, Lost: sys.Counts.Lost}
		b.say("capacity step %d: p95 %.0f ms, %.0f triggers/s sustained, %d of %d lost", len(runs), st.Trigger.P95Ms,
			st.SustainedPerSec, st.Lost, st.Expected)
		return st, nil
	})
	res.FractionOfL = safeDiv(res.Highest, bl.L)
	res.FractionOfB = safeDiv(res.Highest, bl.B)
	res.StepSeconds, res.DrainSeconds = cfg.Duration.Seconds(), cfg.Drain.Seconds()
	if err != nil {
		return System{}, WorkloadInfo{}, &res, err
	}
	pick := len(runs) - 1
	for i, st := range res.Steps {
		if st.Pass && st.Rate == res.Highest {
			pick = i
		}
	}
	sys := runs[pick].sys
	sys.Name = fmt.Sprintf("sundial at %.0f/s", res.Steps[pick].Rate)
	b.say("capacity: %.0f triggers/s with p95 ≤ %s (%.0f%% of L); %s", res.Highest, CapacityP95, 100*res.FractionOfL, res.Stopped)
	return sys, runs[pick].wl, &res, nil
}

// stepNamespace creates a step's namespace.
func (b *Bench) stepNamespace(ctx context.Context, cfg *Config, ns Namespace) error {
	sctx, cancel := context.WithTimeout(ctx, 8*time.Minute)
	defer cancel()
	if err := ns.Setup(sctx, b.Backends, cfg.Shards); err != nil {
		return fmt.Errorf("namespace %s: %w", ns.ID, err)
	}
	return nil
}

// teardown deletes a namespace, even when ctx is done, and says what failed.
func (b *Bench) teardown(ctx context.Context, ns Namespace) {
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
	defer cancel()
	b.say("tearing down namespace %s", ns.ID)
	if err := ns.Teardown(tctx, b.Backends); err != nil {
		b.say("teardown: %v", err)
	}
}

// deleteJobs deletes the n jobs of gen's plan and waits until the registry
// has deleted them, or two minutes passed.
func (b *Bench) deleteJobs(ctx context.Context, gen *loadgen.Generator, n int) {
	before := gen.Counters().Deleted
	if err := gen.Cleanup(ctx); err != nil {
		b.say("deleting the step's jobs: %v", err)
		return
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for gen.Counters().Deleted-before < int64(n) {
		if !sleepUntil(wctx, b.Now().Add(200*time.Millisecond)) {
			b.say("deleting the step's jobs: %d of %d deleted after 2m; the next step runs beside the rest", gen.Counters().Deleted-before, n)
			return
		}
	}
}
