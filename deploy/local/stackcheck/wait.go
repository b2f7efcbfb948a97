package main

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// probeFunc sends one real request to the backend at addr. It returns a short
// description of what answered (for example the server version) or why the
// backend is not ready yet.
type probeFunc func(ctx context.Context, addr string) (detail string, err error)

// target is one backend to wait for.
type target struct {
	name  string
	addr  string
	pid   int // process to watch; 0: none
	probe probeFunc
}

type waitOptions struct {
	timeout      time.Duration // overall limit for the target
	interval     time.Duration // pause after a failed probe
	probeTimeout time.Duration // limit of one probe
	progress     time.Duration // how often to report that we still wait; 0: never
	alive        func(pid int) bool
}

type result struct {
	detail  string
	elapsed time.Duration
	err     error
}

var (
	// errExited is returned when the watched process is gone: waiting longer
	// cannot help.
	errExited = errors.New("process exited")
	// errTimeout is returned when the overall limit passed.
	errTimeout = errors.New("timed out")
	// errInterrupted is returned when the caller's context ended first.
	errInterrupted = errors.New("interrupted")
)

// wait probes t until it answers, its process exits, ctx ends or opts.timeout
// passes. The error of a failed wait carries the last probe error, which is
// the useful part ("connection refused", "bootstrapped = IN_PROGRESS", ...).
func wait(ctx context.Context, t target, opts waitOptions, report func(string)) result {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, opts.timeout)
	defer cancel()
	nextReport := start.Add(opts.progress)
	var last error
	for {
		if t.pid > 0 && opts.alive != nil && !opts.alive(t.pid) {
			return result{elapsed: time.Since(start), err: withLast(fmt.Errorf("%w: pid %d", errExited, t.pid), last)}
		}
		pctx, pcancel := context.WithTimeout(ctx, opts.probeTimeout)
		detail, err := callProbe(pctx, t)
		pcancel()
		if err == nil {
			return result{detail: detail, elapsed: time.Since(start)}
		}
		// A probe cut short because the whole wait ended says only that
		// time ran out; the probe before it says why the backend is not
		// ready, so it stays the reported error.
		if last == nil || ctx.Err() == nil {
			last = err
		}
		if opts.progress > 0 && !time.Now().Before(nextReport) {
			report(fmt.Sprintf("%s: still waiting at %s (%s): %v", t.name, t.addr, time.Since(start).Round(time.Second), err))
			nextReport = time.Now().Add(opts.progress)
		}
		select {
		case <-ctx.Done():
			cause := errInterrupted
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				cause = errTimeout
			}
			return result{elapsed: time.Since(start), err: withLast(cause, last)}
		case <-time.After(opts.interval):
		}
	}
}

// callProbe turns a panic inside a client library into a failed probe: a
// driver bug met while the backend is half started must not end the wait.
func callProbe(ctx context.Context, t target) (detail string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("probe panicked: %v", r)
		}
	}()
	return t.probe(ctx, t.addr)
}

func withLast(err, last error) error {
	if last == nil {
		return err
	}
	return fmt.Errorf("%w (last error: %w)", err, last)
}
