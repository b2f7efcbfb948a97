package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ProcMemory is what /proc/<pid>/status says of a process's memory.
type ProcMemory struct {
	// RSS is VmRSS: resident set size now, bytes.
	RSS int64
	// HWM is VmHWM: the peak resident set size so far, bytes.
	HWM int64
}

// ReadProcMemory reads VmRSS and VmHWM of process pid (Linux).
func ReadProcMemory(pid int) (ProcMemory, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return ProcMemory{}, fmt.Errorf("read memory of process %d: %w", pid, err)
	}
	return parseProcStatus(b)
}

// parseProcStatus reads VmRSS and VmHWM (in kB) from the text of
// /proc/<pid>/status.
func parseProcStatus(b []byte) (ProcMemory, error) {
	var m ProcMemory
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return m, fmt.Errorf("proc status: %s: unexpected value %q", name, rest)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return m, fmt.Errorf("proc status: %s: %w", name, err)
		}
		found++
		if name == "VmRSS" {
			m.RSS = kb << 10
		} else {
			m.HWM = kb << 10
		}
	}
	if found != 2 {
		return m, fmt.Errorf("proc status: VmRSS or VmHWM missing")
	}
	return m, nil
}

// RSSSample is one reading of a process's memory with the number of jobs
// stored at the time.
type RSSSample struct {
	At time.Time `json:"at"`
	// Stored: definitions the registry had accepted.
	Stored int64   `json:"stored"`
	RSSMiB float64 `json:"rss_mib"`
	HWMMiB float64 `json:"hwm_mib"`
}

// RSSMilestone is the first sample at or after a number of stored jobs.
type RSSMilestone struct {
	Stored int64     `json:"stored"`
	Sample RSSSample `json:"sample"`
}

// ProcessMemory is the dispatcher's memory over a run: sampled every
// SampleEverySeconds while the jobs are registered and while they fire.
type ProcessMemory struct {
	// Process is the sampled subprocess ("dispatcher-0").
	Process            string  `json:"process"`
	SampleEverySeconds float64 `json:"sample_every_seconds"`
	// Milestones: the first sample with at least 10,000 jobs stored, and
	// the first with all of them (when the workload has more). A milestone
	// the run never reached is missing.
	Milestones []RSSMilestone `json:"milestones"`
	// Window: samples inside the measured window (every job stored and the
	// workload firing at its planned rate): the largest and the last RSS.
	WindowMaxRSSMiB  float64 `json:"window_max_rss_mib"`
	WindowLastRSSMiB float64 `json:"window_last_rss_mib"`
	// PeakHWMMiB is the largest VmHWM sampled: the process's largest RSS
	// over the whole run.
	PeakHWMMiB float64 `json:"peak_hwm_mib"`
	// Samples are every reading, for plots.
	Samples []RSSSample `json:"samples"`
	// Errors counts failed readings (the process restarting, say).
	Errors int `json:"errors,omitempty"`
}

// memorySampler reads a process's memory at an interval.
type memorySampler struct {
	name   string
	every  time.Duration
	pid    func() (int, bool)
	stored func() int64
	now    func() time.Time
	// marks are the stored-job counts whose first sample is reported (and
	// said when reached).
	marks []int64
	say   func(format string, args ...any)

	mu      sync.Mutex
	samples []RSSSample
	errs    int
	next    int // index of the next mark to say
}

// memoryMarks are the milestones of a workload of jobs: 10,000 stored, and
// all of them when there are more.
func memoryMarks(jobs int64) []int64 {
	marks := []int64{min(10_000, jobs)}
	if jobs > 10_000 {
		marks = append(marks, jobs)
	}
	return marks
}

// run samples until ctx ends.
func (s *memorySampler) run(ctx context.Context) {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		s.sample()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *memorySampler) sample() {
	const mib = 1 << 20
	pid, ok := s.pid()
	if !ok {
		s.mu.Lock()
		s.errs++
		s.mu.Unlock()
		return
	}
	m, err := ReadProcMemory(pid)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.errs++
		return
	}
	sm := RSSSample{At: s.now().UTC(), Stored: s.stored(), RSSMiB: float64(m.RSS) / mib, HWMMiB: float64(m.HWM) / mib}
	s.samples = append(s.samples, sm)
	for s.next < len(s.marks) && sm.Stored >= s.marks[s.next] {
		s.next++
		if s.say != nil {
			s.say("%s RSS %.1f MiB (peak %.1f MiB) with %d jobs stored", s.name, sm.RSSMiB, sm.HWMMiB, sm.Stored)
		}
	}
}

// report summarises the samples: the first sample at each mark, and the
// window [from, to).
func (s *memorySampler) report(from, to time.Time) *ProcessMemory {
	s.mu.Lock()
	defer s.mu.Unlock()
	return summariseMemory(s.name, s.every, s.samples, s.errs, s.marks, from, to)
}

func summariseMemory(name string, every time.Duration, samples []RSSSample, errs int, marks []int64, from, to time.Time) *ProcessMemory {
	pm := &ProcessMemory{Process: name, SampleEverySeconds: every.Seconds(), Samples: samples, Errors: errs}
	for _, mark := range marks {
		for _, sm := range samples {
			if sm.Stored >= mark {
				pm.Milestones = append(pm.Milestones, RSSMilestone{Stored: mark, Sample: sm})
				break
			}
		}
	}
	for _, sm := range samples {
		if !sm.At.Before(from) && sm.At.Before(to) {
			pm.WindowMaxRSSMiB = max(pm.WindowMaxRSSMiB, sm.RSSMiB)
			pm.WindowLastRSSMiB = sm.RSSMiB
		}
	}
	for _, sm := range samples { // a restarted process starts a new VmHWM
		pm.PeakHWMMiB = max(pm.PeakHWMMiB, sm.HWMMiB)
	}
	return pm
}
