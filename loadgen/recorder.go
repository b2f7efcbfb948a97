package loadgen

import (
	"fmt"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// Latencies are recorded in microseconds, from 1µs to an hour, with three
// significant digits.
const (
	histMin    = 1
	histMax    = int64(time.Hour / time.Microsecond)
	histDigits = 3
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(histMin, histMax, histDigits) }

// execution names one execution of an attempt: a runner's lease on it. Two
// STARTED events with the same execution are one event delivered twice (a
// redelivery of sundial.events), not two executions.
type execution struct {
	attempt uint32
	token   int64
	runner  uint16
}

// runState is what the recorder knows of one run.
type runState struct {
	dispatches uint16 // run records seen for attempt 1
	dispatchUs int64  // dispatch latency of the first record
	latencyUs  int64  // trigger latency of the first start of attempt 1
	startMs    int64  // when that start was, unix ms (0: none yet)
	execs      []execution
}

// Sample is one trigger latency: the run's due time and its latency.
type Sample struct {
	DueMs     int64
	LatencyUs int64
}

// Recorder turns the events and run records of a workload into latencies and
// counts. It is safe for concurrent use; it does no I/O.
type Recorder struct {
	parse func(runID string) (RunKey, bool)
	// from and to bound the due times whose latencies are recorded: runs due
	// before from are the warm-up.
	from, to int64

	mu        sync.Mutex
	runs      map[RunKey]*runState
	runners   map[string]uint16
	recent    *hdrhistogram.Histogram // trigger latencies since the last Progress
	events    int64
	foreign   int64
	malformed int64
	early     int64 // STARTED before the due time: recorded as 0, counted here
	started   int64 // runs started at least once
}

// NewRecorder records the runs parse recognises. The latencies of every
// run are kept; those of the runs due in the window [from, to) make the
// histograms and samples, whenever the window is set (SetWindow).
func NewRecorder(parse func(string) (RunKey, bool), from, to time.Time) *Recorder {
	return &Recorder{
		parse:   parse,
		from:    from.UnixMilli(),
		to:      to.UnixMilli(),
		runs:    map[RunKey]*runState{},
		runners: map[string]uint16{},
		recent:  newHist(),
	}
}

// SetWindow moves the measured window.
func (r *Recorder) SetWindow(from, to time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.from, r.to = from.UnixMilli(), to.UnixMilli()
}

func (r *Recorder) inWindow(dueMs int64) bool { return dueMs >= r.from && dueMs < r.to }

func (r *Recorder) state(k RunKey) *runState {
	s := r.runs[k]
	if s == nil {
		s = &runState{}
		r.runs[k] = s
	}
	return s
}

func latencyUs(d time.Duration) (int64, bool) {
	us := d.Microseconds()
	if us < histMin {
		return histMin, us < 0
	}
	return min(us, histMax), false
}

// ObserveEvent records one run event. Only the events that tell a start
// matter: STARTED, and any other event carrying started_time (a runner
// holds STARTED back and drops it when the attempt ends soon after, its
// outcome carrying the start). The first start of attempt 1 of a run gives
// its trigger latency (started_time, or a STARTED event's time without it,
// minus the attempt's due time); every distinct execution (attempt, fencing
// token, runner) is remembered for the duplicate count, whichever of its
// events told it.
func (r *Recorder) ObserveEvent(ev *sundialv1.RunEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events++
	start := ev.GetStartedTime()
	if start == nil && ev.GetState() == sundialv1.RunState_RUN_STATE_STARTED {
		start = ev.GetTime()
	}
	if start == nil && ev.GetState() != sundialv1.RunState_RUN_STATE_STARTED {
		return
	}
	k, ok := r.parse(ev.GetRunId())
	if !ok {
		r.foreign++
		return
	}
	if start == nil || ev.GetAttemptDueTime() == nil {
		r.malformed++
		return
	}
	runner, ok := r.runners[ev.GetRunnerId()]
	if !ok {
		runner = uint16(len(r.runners))
		r.runners[ev.GetRunnerId()] = runner
	}
	x := execution{attempt: max(ev.GetAttempt(), 1), token: ev.GetFencingToken(), runner: runner}
	s := r.state(k)
	if slices.Contains(s.execs, x) {
		return // the same event delivered again
	}
	first := len(s.execs) == 0
	s.execs = append(s.execs, x)
	if !first || x.attempt != 1 {
		return
	}
	r.started++
	us, early := latencyUs(start.AsTime().Sub(ev.GetAttemptDueTime().AsTime()))
	if early {
		r.early++
	}
	r.recent.RecordValue(us) //nolint:errcheck // clamped into range above
	s.latencyUs, s.startMs = us, start.AsTime().UnixMilli()
}

// ObserveDispatch records a run record acknowledged by Kafka at acked: the
// first record of attempt 1 of a run gives its dispatch latency.
func (r *Recorder) ObserveDispatch(run *sundialv1.Run, acked time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k, ok := r.parse(run.GetRunId())
	if !ok {
		r.foreign++
		return
	}
	if max(run.GetAttempt(), 1) != 1 {
		return
	}
	due := run.GetAttemptDueTime()
	if due == nil {
		due = run.GetDueTime()
	}
	if due == nil {
		r.malformed++
		return
	}
	s := r.state(k)
	s.dispatches++
	if s.dispatches == 1 {
		s.dispatchUs, _ = latencyUs(acked.Sub(due.AsTime()))
	}
}

// Progress is a snapshot for the progress line.
type Progress struct {
	Events  int64
	Started int64
	// RecentP95 is the p95 trigger latency of the runs started since the
	// previous call, and RecentStarted how many there were.
	RecentP95     time.Duration
	RecentStarted int64
}

// Progress returns the counts so far and resets the recent histogram.
func (r *Recorder) Progress() Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := Progress{
		Events:        r.events,
		Started:       r.started,
		RecentP95:     time.Duration(r.recent.ValueAtQuantile(95)) * time.Microsecond,
		RecentStarted: r.recent.TotalCount(),
	}
	r.recent.Reset()
	return p
}

// Counts are the loss and duplicate figures of a run of the workload.
type Counts struct {
	// Expected runs: due in the window according to the workload.
	Expected int64 `json:"expected"`
	// StartedInWindow: expected runs that started at least once.
	StartedInWindow int64 `json:"started_in_window"`
	// Lost: expected runs that never started.
	Lost int64 `json:"lost"`
	// LostDispatched: of the lost runs, those whose run record reached
	// Kafka (a runner-side backlog or loss); the rest were never dispatched.
	LostDispatched int64 `json:"lost_dispatched"`
	// StartedDuringWindow: runs due in the window that started before its
	// end; divided by the window's length, the sustained trigger rate.
	StartedDuringWindow int64 `json:"started_during_window"`
	// DuplicateExecutions: runs (any due time) with more than one execution
	// of the same attempt (distinct fencing token or runner).
	DuplicateExecutions int64 `json:"duplicate_executions"`
	// ExtraExecutions: executions beyond the first of each attempt, summed.
	ExtraExecutions int64 `json:"extra_executions"`
	// DuplicateDispatches: runs whose first attempt was written to Kafka more
	// than once (at-least-once delivery; harmless unless it executes twice).
	DuplicateDispatches int64 `json:"duplicate_dispatches"`
	// Unexpected: runs due in the window that started but that the workload
	// did not schedule (a wrong fire time).
	Unexpected int64 `json:"unexpected"`
	// EarlyStarts: runs that started before their due time.
	EarlyStarts int64 `json:"early_starts"`
	// Events read, and events of other workloads ignored.
	Events  int64 `json:"events"`
	Foreign int64 `json:"foreign"`
	// Malformed events (missing times).
	Malformed int64 `json:"malformed"`
	// LostExamples are up to 10 of the lost runs, for diagnosis.
	LostExamples []RunKey `json:"lost_examples,omitempty"`
	// DuplicateExamples describe up to 10 runs executed more than once:
	// each execution's attempt, fencing token and runner.
	DuplicateExamples []string `json:"duplicate_examples,omitempty"`
}

// Result compares what happened with the expected runs (the workload's runs
// due in the window). Call it after the drain, when the runs due by the end
// of the window have had their time to start.
func (r *Recorder) Result(expected iter.Seq[RunKey]) Counts {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := Counts{Events: r.events, Foreign: r.foreign, Malformed: r.malformed, EarlyStarts: r.early}
	seen := make(map[RunKey]bool)
	for k := range expected {
		c.Expected++
		seen[k] = true
		if s := r.runs[k]; s != nil && len(s.execs) > 0 {
			c.StartedInWindow++
		} else {
			c.Lost++
			if s != nil && s.dispatches > 0 {
				c.LostDispatched++
			}
			if len(c.LostExamples) < 10 {
				c.LostExamples = append(c.LostExamples, k)
			}
		}
	}
	for k, s := range r.runs {
		if s.dispatches > 1 {
			c.DuplicateDispatches++
		}
		if len(s.execs) == 0 {
			continue
		}
		if r.inWindow(k.DueMs) {
			if !seen[k] {
				c.Unexpected++
			}
			if s.startMs > 0 && r.inWindow(s.startMs) {
				c.StartedDuringWindow++
			}
		}
		perAttempt := map[uint32]int{}
		dup := false
		for _, x := range s.execs {
			perAttempt[x.attempt]++
			if perAttempt[x.attempt] > 1 {
				dup = true
				c.ExtraExecutions++
			}
		}
		if dup {
			c.DuplicateExecutions++
			if len(c.DuplicateExamples) < 10 {
				c.DuplicateExamples = append(c.DuplicateExamples, r.describe(k, s))
			}
		}
	}
	return c
}

// Trigger returns the trigger latency histogram (µs) of the runs due in
// the window that started.
func (r *Recorder) Trigger() *hdrhistogram.Histogram {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := newHist()
	for k, s := range r.runs {
		if s.startMs > 0 && r.inWindow(k.DueMs) {
			h.RecordValue(s.latencyUs) //nolint:errcheck // clamped into range when kept
		}
	}
	return h
}

// Starts returns when the runs due in the window first started (the first
// STARTED of attempt 1), unix ms, in order.
func (r *Recorder) Starts() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int64
	for k, s := range r.runs {
		if s.startMs > 0 && r.inWindow(k.DueMs) {
			out = append(out, s.startMs)
		}
	}
	slices.Sort(out)
	return out
}

// Dispatch returns the dispatch latency histogram (µs) of the runs due in
// the window that were written to Kafka.
func (r *Recorder) Dispatch() *hdrhistogram.Histogram {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := newHist()
	for k, s := range r.runs {
		if s.dispatches > 0 && r.inWindow(k.DueMs) {
			h.RecordValue(s.dispatchUs) //nolint:errcheck // clamped into range when kept
		}
	}
	return h
}

// Samples returns the trigger latencies of the runs due in the window, by
// due time.
func (r *Recorder) Samples() []Sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Sample
	for k, s := range r.runs {
		if s.startMs > 0 && r.inWindow(k.DueMs) {
			out = append(out, Sample{DueMs: k.DueMs, LatencyUs: s.latencyUs})
		}
	}
	slices.SortFunc(out, func(a, b Sample) int {
		switch {
		case a.DueMs < b.DueMs:
			return -1
		case a.DueMs > b.DueMs:
			return 1
		}
		return 0
	})
	return out
}

// StartsOf returns how many executions of run k were seen.
func (r *Recorder) StartsOf(k RunKey) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.runs[k]; s != nil {
		return len(s.execs)
	}
	return 0
}

// DispatchesOf returns how many run records of attempt 1 of run k were seen.
func (r *Recorder) DispatchesOf(k RunKey) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.runs[k]; s != nil {
		return int(s.dispatches)
	}
	return 0
}

// describe names a run's executions, for DuplicateExamples.
func (r *Recorder) describe(k RunKey, s *runState) string {
	names := make(map[uint16]string, len(r.runners))
	for n, i := range r.runners {
		names[i] = n
	}
	out := fmt.Sprintf("job %d due %d (%d run records):", k.Job, k.DueMs, s.dispatches)
	for _, x := range s.execs {
		out += fmt.Sprintf(" [attempt %d, token %d, runner %s]", x.attempt, x.token, names[x.runner])
	}
	return out
}
