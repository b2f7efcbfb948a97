package bench

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/pprof/profile"
)

// DefaultProfileSpan is Config.ProfileSpan's default.
const DefaultProfileSpan = 30 * time.Second

// topFunctions is how many functions the summary lists per CPU profile.
const topFunctions = 8

// Profile is one Go profile the bench captured of a process during the
// measured window.
type Profile struct {
	// Process is "bench" (the bench process) or a subprocess's name
	// ("dispatcher-0").
	Process string `json:"process"`
	// Kind is "cpu" or "heap".
	Kind string `json:"kind"`
	// File is the profile's path in the results folder
	// ("profiles/dispatcher-0.cpu.pprof"); empty when the capture failed.
	File string `json:"file,omitempty"`
	// From and To: cpu: the span profiled; heap: To is when it was taken.
	From time.Time `json:"from,omitzero"`
	To   time.Time `json:"to,omitzero"`
	// Error says why the capture failed, or why its functions could not be
	// read.
	Error string `json:"error,omitempty"`
	// CPUSeconds: cpu: the CPU time the profile sampled.
	CPUSeconds float64 `json:"cpu_seconds,omitempty"`
	// Top: cpu: the functions with the most cumulative CPU time, most
	// first.
	Top []ProfileFunc `json:"top,omitempty"`

	data []byte // the profile as captured, written by Report.Write
}

// ProfileFunc is one function of a CPU profile.
type ProfileFunc struct {
	Function string `json:"function"`
	// FlatSeconds: CPU time in the function itself; CumSeconds: in it and
	// what it called.
	FlatSeconds float64 `json:"flat_seconds"`
	CumSeconds  float64 `json:"cum_seconds"`
	// CumShare is CumSeconds over the profile's CPUSeconds.
	CumShare float64 `json:"cum_share"`
}

// profileSpan is the CPU profiles' span inside the window [from, to): span
// long, in the middle, or the whole window when it is shorter. Whole
// seconds, as /debug/pprof/profile takes them.
func profileSpan(from, to time.Time, span time.Duration) (time.Time, time.Duration) {
	window := to.Sub(from)
	span = min(span, window).Truncate(time.Second)
	span = max(span, time.Second)
	return from.Add((window - span) / 2), span
}

// profileTarget is a process whose profiles are captured: the bench
// process itself (addr empty) or a subprocess serving /debug/pprof/ on
// addr.
type profileTarget struct {
	name string
	addr func() (string, bool)
}

// profiler captures, for each target, a CPU profile of a span in the middle
// of the window and a heap profile at its end. A failed capture is a
// Profile with an Error, never an error of the run.
type profiler struct {
	targets []profileTarget
	span    time.Duration
	// skipBenchCPU: the bench process's CPU is already being profiled
	// (--cpu-profile), and a process has one CPU profile at a time.
	skipBenchCPU bool
	client       *http.Client
	now          func() time.Time
}

// run captures the profiles of the window [from, to); it returns once the
// heap profiles are taken at to, or ctx ends.
func (p *profiler) run(ctx context.Context, from, to time.Time) []Profile {
	start, span := profileSpan(from, to, p.span)
	var mu sync.Mutex
	var out []Profile
	add := func(pr Profile) {
		mu.Lock()
		defer mu.Unlock()
		out = append(out, pr)
	}
	var wg sync.WaitGroup
	if sleepUntil(ctx, start) {
		for _, t := range p.targets {
			if t.addr == nil && p.skipBenchCPU {
				continue
			}
			wg.Go(func() { add(p.cpu(ctx, t, span)) })
		}
	}
	if sleepUntil(ctx, to) {
		for _, t := range p.targets {
			wg.Go(func() { add(p.heap(ctx, t)) })
		}
	}
	wg.Wait()
	order := map[string]int{}
	for i, t := range p.targets {
		order[t.name] = i
	}
	slices.SortFunc(out, func(a, b Profile) int {
		return cmp.Or(cmp.Compare(order[a.Process], order[b.Process]), cmp.Compare(a.Kind, b.Kind))
	})
	return out
}

func profileFile(process, kind string) string {
	return "profiles/" + process + "." + kind + ".pprof"
}

func (p *profiler) cpu(ctx context.Context, t profileTarget, span time.Duration) Profile {
	pr := Profile{Process: t.name, Kind: "cpu", From: p.now().UTC()}
	var data []byte
	var err error
	if t.addr == nil {
		data, err = benchCPUProfile(ctx, span)
	} else {
		data, err = p.fetch(ctx, t, "/debug/pprof/profile?seconds="+strconv.Itoa(int(span.Seconds())), span)
	}
	pr.To = p.now().UTC()
	return withCPUProfile(pr, data, err)
}

// withCPUProfile sets the profile's data, file and top functions, or its
// error.
func withCPUProfile(pr Profile, data []byte, err error) Profile {
	if err != nil {
		pr.Error = err.Error()
		return pr
	}
	pr.data, pr.File = data, profileFile(pr.Process, pr.Kind)
	parsed, err := profile.ParseData(data)
	if err != nil {
		pr.Error = fmt.Sprintf("read the profile: %v", err)
		return pr
	}
	pr.Top, pr.CPUSeconds, err = TopCumulative(parsed, topFunctions)
	if err != nil {
		pr.Error = err.Error()
	}
	return pr
}

func (p *profiler) heap(ctx context.Context, t profileTarget) Profile {
	pr := Profile{Process: t.name, Kind: "heap"}
	var data []byte
	var err error
	if t.addr == nil {
		var buf bytes.Buffer
		err = pprof.Lookup("heap").WriteTo(&buf, 0)
		data = buf.Bytes()
	} else {
		data, err = p.fetch(ctx, t, "/debug/pprof/heap", 0)
	}
	pr.To = p.now().UTC()
	if err != nil {
		pr.Error = err.Error()
		return pr
	}
	pr.data, pr.File = data, profileFile(pr.Process, pr.Kind)
	return pr
}

// fetch reads a profile from the target's /debug/pprof/, allowing span
// for the profile itself on top of the request's own timeout.
func (p *profiler) fetch(ctx context.Context, t profileTarget, path string, span time.Duration) ([]byte, error) {
	addr, ok := t.addr()
	if !ok {
		return nil, fmt.Errorf("%s is not running", t.name)
	}
	ctx, cancel := context.WithTimeout(ctx, span+30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", req.URL, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", req.URL, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", req.URL, resp.Status, bytes.TrimSpace(body))
	}
	return body, nil
}

// benchCPUProfile profiles this process's CPU for span.
func benchCPUProfile(ctx context.Context, span time.Duration) ([]byte, error) {
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		return nil, err
	}
	sleepUntil(ctx, time.Now().Add(span))
	pprof.StopCPUProfile()
	return buf.Bytes(), nil
}

// readCPUProfileFile is the --cpu-profile file of the window as the bench
// process's CPU profile.
func readCPUProfileFile(path string, from, to time.Time) Profile {
	data, err := os.ReadFile(path)
	return withCPUProfile(Profile{Process: "bench", Kind: "cpu", From: from.UTC(), To: to.UTC()}, data, err)
}

// TopCumulative returns the n functions of a CPU profile with the most
// cumulative CPU time (the function and what it called, each function
// counted once per stack however often it recurs), most first, ties by
// name, and the profile's total CPU time in seconds.
func TopCumulative(p *profile.Profile, n int) ([]ProfileFunc, float64, error) {
	vi := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			vi = i
		}
	}
	if vi < 0 {
		return nil, 0, fmt.Errorf("not a CPU profile: no cpu/nanoseconds sample type")
	}
	flat, cum := map[string]int64{}, map[string]int64{}
	var total int64
	for _, s := range p.Sample {
		v := s.Value[vi]
		total += v
		seen := map[string]bool{}
		for li, loc := range s.Location {
			for i, line := range loc.Line {
				name := "?"
				if line.Function != nil {
					name = line.Function.Name
				}
				if li == 0 && i == 0 {
					flat[name] += v // the leaf: the innermost inlined frame
				}
				if !seen[name] {
					seen[name] = true
					cum[name] += v
				}
			}
		}
	}
	names := make([]string, 0, len(cum))
	for name := range cum {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(cum[b], cum[a]), cmp.Compare(a, b)) })
	names = names[:min(n, len(names))]
	const sec = float64(time.Second)
	out := make([]ProfileFunc, len(names))
	for i, name := range names {
		out[i] = ProfileFunc{Function: name, FlatSeconds: float64(flat[name]) / sec, CumSeconds: float64(cum[name]) / sec,
			CumShare: safeDiv(float64(cum[name]), float64(total))}
	}
	return out, float64(total) / sec, nil
}

// profilesView is the Profiles section: the files and the top functions
// of each CPU profile.
type profilesView struct {
	// System is the system measured.
	System   string
	Profiles []profileLine
	// Tops are the CPU profiles with top functions, for their tables.
	Tops []Profile
}

// profileLine is one profile of the list.
type profileLine struct {
	Profile
	// Failed: nothing was captured; Heap: a heap profile.
	Failed, Heap bool
	// Seconds and Cores: a CPU profile's span and the cores it used.
	Seconds, Cores float64
}

// profilesSummary builds the Profiles section.
func profilesSummary(system string, profiles []Profile) *profilesView {
	v := &profilesView{System: system}
	for _, pr := range profiles {
		span := pr.To.Sub(pr.From).Seconds()
		v.Profiles = append(v.Profiles, profileLine{Profile: pr, Failed: pr.Error != "" && pr.File == "", Heap: pr.Kind == "heap",
			Seconds: span, Cores: safeDiv(pr.CPUSeconds, span)})
		if hasTop(pr) {
			v.Tops = append(v.Tops, pr)
		}
	}
	return v
}

// hasTop reports whether pr is a CPU profile with top functions to list.
func hasTop(pr Profile) bool {
	return pr.Kind == "cpu" && len(pr.Top) > 0
}
