package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"sync/atomic"
	"time"
)

// Hog is the noisy neighbour of a --noisy run: a child process that keeps
// one core busy beside the pipeline. It runs as a process of its own, not a
// goroutine of the bench, so that it competes with the backends and the
// pipeline for the CPU the way another tenant would, and cannot be paused
// by the bench's own garbage collector or scheduler.
//
// The child runs RunHog. It stops when Stop closes its stdin, and also when
// the bench dies without calling Stop (its stdin reaches end of file), so a
// hog never outlives the run that started it.
type Hog struct {
	// Command starts the child, for example {"/path/sundial", "bench",
	// "hog"}. Required.
	Command []string

	cmd   *exec.Cmd
	stdin io.Closer
	done  chan struct{}
	err   error
}

// Start starts the child. A Hog is started once.
func (h *Hog) Start(ctx context.Context) error {
	if len(h.Command) == 0 {
		return errors.New("noisy: hog command: empty")
	}
	if h.cmd != nil {
		return errors.New("noisy: hog already started")
	}
	// Not CommandContext: the hog's lifetime is Start to Stop, and Stop
	// waits for it.
	cmd := exec.Command(h.Command[0], h.Command[1:]...) //nolint:noctx // the hog lives from Start to Stop, which ends it
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("noisy: hog stdin: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("noisy: start hog %v: %w", h.Command, err)
	}
	h.cmd, h.stdin, h.done = cmd, stdin, make(chan struct{})
	go func() {
		defer close(h.done)
		h.err = cmd.Wait()
	}()
	return nil
}

// PID is the child's process id; 0 before Start.
func (h *Hog) PID() int {
	if h.cmd == nil || h.cmd.Process == nil {
		return 0
	}
	return h.cmd.Process.Pid
}

// Stop ends the child and waits for it: stdin closed, then SIGKILL if it
// has not exited within 5s. It is idempotent and safe before Start.
func (h *Hog) Stop() {
	if h.cmd == nil {
		return
	}
	_ = h.stdin.Close()
	select {
	case <-h.done:
	case <-time.After(5 * time.Second):
		_ = h.cmd.Process.Kill()
		<-h.done
	}
}

// Exited reports whether the child has exited, and its error.
func (h *Hog) Exited() (bool, error) {
	if h.done == nil {
		return false, nil
	}
	select {
	case <-h.done:
		return true, h.err
	default:
		return false, nil
	}
}

// RunHog is the body of the hog process: one goroutine locked to its OS
// thread spins until ctx is done or stdin reaches end of file (the parent
// closed it, or died). One thread can use one core and no more, whatever
// GOMAXPROCS is, so the hog takes one core's worth of CPU from the machine.
func RunHog(ctx context.Context, stdin io.Reader) error {
	var stop atomic.Bool
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		cancel()
	}()
	spun := make(chan uint64)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var x uint64
		// The atomic load on every turn keeps the loop from being
		// optimised away and lets it end within a turn of Stop.
		for !stop.Load() {
			x = x*6364136223846793005 + 1442695040888963407
		}
		spun <- x
	}()
	<-ctx.Done()
	stop.Store(true)
	<-spun
	return nil
}
