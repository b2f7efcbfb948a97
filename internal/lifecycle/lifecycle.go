package lifecycle

import (
	"context"
	"errors"
	"sync"
)

// ErrRunning is returned by Start when the component is already running.
var ErrRunning = errors.New("already running")

// Lifecycle serialises the starts and stops of one component. The zero
// value is stopped and ready to Start.
type Lifecycle struct {
	mu  sync.Mutex
	run *Run // nil when stopped
}

// Run is one Start..Stop period of a component: the goroutines started
// during it and what Stop must release afterwards.
type Run struct {
	// ctx is the run's context, kept so that Go can hand it to each
	// goroutine: a Run is itself the scope that context describes.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	hooks  []func()
}

// Go starts fn in a goroutine owned by the run; fn receives the run's
// context, which ends when Stop is called, and must return soon after.
func (r *Run) Go(fn func(ctx context.Context)) {
	r.wg.Go(func() { fn(r.ctx) })
}

// OnStop registers fn to run during Stop, after the run's context has
// ended and its Go goroutines have returned. Hooks run in reverse order of
// registration.
func (r *Run) OnStop(fn func()) {
	r.hooks = append(r.hooks, fn)
}

// Component is the Start/Stop of every long-lived component.
type Component interface {
	Start(ctx context.Context) error
	Stop()
}

// StartAll starts comps in order and returns stop, which stops the ones
// that started in reverse order. On the first error to start, it stops
// those started before it and returns the error; stop is then a no-op.
func StartAll(ctx context.Context, comps ...Component) (stop func(), err error) {
	started := make([]Component, 0, len(comps))
	stop = func() {
		for i := len(started) - 1; i >= 0; i-- {
			started[i].Stop()
		}
		started = nil
	}
	for _, c := range comps {
		if err := c.Start(ctx); err != nil {
			stop()
			return stop, err
		}
		started = append(started, c)
	}
	return stop, nil
}

// StartAll starts comps in order (StartAll) and registers their stop on
// the run, so Stop stops them in reverse order.
func (r *Run) StartAll(ctx context.Context, comps ...Component) error {
	stop, err := StartAll(ctx, comps...)
	r.OnStop(stop)
	return err
}

// stop ends the run: cancel, wait, then the hooks.
func (r *Run) stop() {
	r.cancel()
	r.wg.Wait()
	for i := len(r.hooks) - 1; i >= 0; i-- {
		r.hooks[i]()
	}
}

// Start begins a new run and calls start with ctx (for the setup) and the
// run. When start fails, what it registered is stopped and the error is
// returned. It fails with ErrRunning while a run is in progress.
func (l *Lifecycle) Start(ctx context.Context, start func(ctx context.Context, run *Run) error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.run != nil {
		return ErrRunning
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	run := &Run{ctx: runCtx, cancel: cancel}
	if err := start(ctx, run); err != nil {
		run.stop()
		return err
	}
	l.run = run
	return nil
}

// Stop ends the run in progress, if any, and returns once its goroutines
// have returned and its OnStop hooks have run. It is idempotent and safe
// before Start.
func (l *Lifecycle) Stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.run == nil {
		return
	}
	l.run.stop()
	l.run = nil
}

// Running reports whether a run is in progress.
func (l *Lifecycle) Running() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.run != nil
}
