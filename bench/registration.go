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

// registrationMarkdown writes the Registration section: the rate, the CPU
// table and the top functions of the bench process's profile.
func registrationMarkdown(p func(string, ...any), system string, r *Registration) {
	secs := r.To.Sub(r.From).Seconds()
	p("\n## Registration (%s)\n\n", system)
	p("%d definitions registered from %s to %s: %.1f s, %.0f definitions/s. The registry runs in the bench process; the CPU below covers the whole registration (/proc every %.0fs).\n\n",
		r.Definitions, r.From.Format("15:04:05"), r.To.Format("15:04:05"), secs, safeDiv(float64(r.Definitions), secs), r.CPU.SampleEverySeconds)
	cpuTable(p, r.CPU)
	pr := r.Profile
	if pr.File == "" {
		p("\n- bench CPU profile: **capture failed**: %s\n", pr.Error)
		return
	}
	span := pr.To.Sub(pr.From).Seconds()
	p("\n- bench CPU profile of the registration: `%s`, %.1f s of CPU in %.0f s (%.2f cores)\n", pr.File, pr.CPUSeconds, span, safeDiv(pr.CPUSeconds, span))
	topMarkdown(p, pr)
}
