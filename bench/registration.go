package bench

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"runtime/pprof"
	"sync"
	"time"
)

// Registration is where the machine's CPU went while the workload's
// definitions were registered: the registry runs in the bench process, so
// its CPU profile says where the registry's time went, and the CPU table
// says what the backends took beside it.
type Registration struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Definitions is how many definitions were registered.
	Definitions int       `json:"definitions"`
	CPU         *CPUUsage `json:"cpu,omitempty"`
	// Profile is the bench process's CPU profile of the whole
	// registration, written to profiles/bench.registration.cpu.pprof.
	Profile Profile `json:"profile"`
}

// registrationWatch samples the CPU of the stack and the pipeline, and
// profiles the bench process, from its start until finish.
type registrationWatch struct {
	now    func() time.Time
	from   time.Time
	cancel context.CancelFunc
	wg     sync.WaitGroup
	cpu    *cpuSampler
	prof   bytes.Buffer
	// profErr is why the CPU profile did not start (another one runs:
	// a process has one CPU profile at a time).
	profErr error
}

func (b *Bench) watchRegistration(ctx context.Context, cfg Config, procs *Processes) *registrationWatch {
	w := &registrationWatch{now: b.Now, from: b.Now(), cpu: &cpuSampler{procs: b.cpuProcesses(cfg, procs), every: time.Second, now: b.Now}}
	ctx, w.cancel = context.WithCancel(ctx)
	if err := pprof.StartCPUProfile(&w.prof); err != nil {
		w.profErr = fmt.Errorf("start the CPU profile: %w", err)
	}
	// The sampler runs until finish cancels it: the registration's end is
	// not known in advance.
	w.wg.Go(func() { w.cpu.run(ctx, w.from, w.from.Add(24*time.Hour)) })
	return w
}

// finish stops the sampling and the profile and returns what they saw of
// the registration of definitions definitions.
func (w *registrationWatch) finish(definitions int) *Registration {
	to := w.now()
	if w.profErr == nil {
		pprof.StopCPUProfile()
	}
	w.cancel()
	w.wg.Wait()
	w.cpu.sample() // the end of the last interval
	pr := Profile{Process: "bench", Kind: "cpu", From: w.from.UTC(), To: to.UTC()}
	pr = withCPUProfile(pr, w.prof.Bytes(), w.profErr)
	if pr.File != "" {
		pr.File = profileFile("bench.registration", "cpu")
	}
	return &Registration{From: w.from.UTC(), To: to.UTC(), Definitions: definitions, CPU: w.cpu.report(runtime.NumCPU()), Profile: pr}
}

// registrationView is the Registration section: the rate, the CPU table
// and the bench process's profile.
type registrationView struct {
	// System is the system measured.
	System string
	*Registration
	Seconds, PerSec float64
	// CPUTable is the CPU of the whole registration; nil when it was not
	// sampled.
	CPUTable *cpuTableView
	// ProfileSeconds and ProfileCores: the profile's span and the cores it
	// used.
	ProfileSeconds, ProfileCores float64
	// HasTop: the profile has top functions to list.
	HasTop bool
}

// registrationSummary builds the Registration section.
func registrationSummary(system string, r *Registration) *registrationView {
	secs := r.To.Sub(r.From).Seconds()
	v := &registrationView{System: system, Registration: r, Seconds: secs, PerSec: safeDiv(float64(r.Definitions), secs)}
	if r.CPU != nil {
		v.CPUTable = cpuTableSummary(r.CPU)
	}
	span := r.Profile.To.Sub(r.Profile.From).Seconds()
	v.ProfileSeconds, v.ProfileCores = span, safeDiv(r.Profile.CPUSeconds, span)
	v.HasTop = hasTop(r.Profile)
	return v
}
