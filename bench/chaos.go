package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// StackBackends are the backend names of the local stack, as
// deploy/local/stack.sh spells them.
var StackBackends = []string{"redis", "kafka", "cassandra"}

// ChaosPlan is what a chaos run kills and when.
type ChaosPlan struct {
	// Window is the length of the measured window; kills fall inside it.
	Window time.Duration
	// Every is the interval between two process kills: the first at
	// Every/2 (the seconds before it are the undisturbed state recovery is
	// measured against), then every Every while inside the window.
	Every time.Duration
	// Processes are the names a process kill picks from, uniformly at
	// random.
	Processes []string
	// Backends are killed once each, half-way between two process kills,
	// spread evenly over the window in the order given.
	Backends []string
	// Seed makes the random choices repeatable.
	Seed uint64
}

// PlannedKill is one kill of a ChaosPlan.
type PlannedKill struct {
	// At is the time since the start of the window.
	At time.Duration
	// Target is a process name ("runner-1") or a backend ("kafka").
	Target string
	// Backend says whether Target is a backend of the stack.
	Backend bool
}

// Kills returns the plan's kills in time order. It is pure: the same plan
// gives the same kills.
func (c ChaosPlan) Kills() ([]PlannedKill, error) {
	var errs []error
	if c.Every <= 0 || c.Window <= 0 {
		errs = append(errs, fmt.Errorf("chaos plan: every %s, window %s: must be positive", c.Every, c.Window))
	}
	if len(c.Processes) == 0 {
		errs = append(errs, errors.New("chaos plan: processes: need at least one to kill"))
	}
	n := 0
	if c.Every > 0 && c.Window > c.Every/2 {
		n = int((c.Window-c.Every/2-1)/c.Every) + 1 // process kills strictly inside the window
	}
	if len(c.Backends) > 0 && n < len(c.Backends) {
		errs = append(errs, fmt.Errorf("chaos plan: %d process kills in a window of %s leave no room for %d backend kills between them", n, c.Window, len(c.Backends)))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(c.Seed, 0x5eed))
	out := make([]PlannedKill, 0, n+len(c.Backends))
	for k := range n {
		out = append(out, PlannedKill{At: c.Every/2 + time.Duration(k)*c.Every, Target: c.Processes[rng.IntN(len(c.Processes))]})
	}
	// Backend j goes half-way between process kills slot(j)-1 and
	// slot(j), the slots spread evenly over the n kills, so that each
	// outage has a process kill before and after it and the recovery of
	// each is measured on its own.
	for j, b := range c.Backends {
		slot := max((j+1)*n/(len(c.Backends)+1), 1)
		out = append(out, PlannedKill{At: time.Duration(slot) * c.Every, Target: b, Backend: true})
	}
	slices.SortStableFunc(out, func(a, b PlannedKill) int { return int(a.At - b.At) })
	return out, nil
}

// Stack restarts the backends of a local stack through
// deploy/local/stack.sh, with the environment of the bench process (the
// SUNDIAL_* settings name the stack).
type Stack struct {
	// Script is the path of stack.sh.
	Script string
}

// Check refuses a stack the bench cannot restart: stack.sh must answer
// for the same addresses as the bench's backends, and report every backend
// running and ready.
func (s Stack) Check(ctx context.Context, be Backends) error {
	if s.Script == "" {
		return errors.New("chaos: stack script: required, to kill and restart the backends")
	}
	out, err := exec.CommandContext(ctx, s.Script, "env").Output()
	if err != nil {
		return fmt.Errorf("chaos: %s env: %w", s.Script, err)
	}
	env := parseExports(out)
	var errs []error
	same := func(name, stack string, bench []string) {
		if len(bench) != 1 || !sameAddr(bench[0], stack) {
			errs = append(errs, fmt.Errorf("chaos: %s %v is not the stack's %s (%s env; run the bench with the stack's SUNDIAL_* settings)", name, bench, stack, s.Script))
		}
	}
	same("kafka brokers", env["SUNDIAL_KAFKA_BROKERS"], be.Brokers)
	same("cassandra hosts", env["SUNDIAL_CASSANDRA_HOSTS"], be.CassandraHosts)
	same("redis addr", env["SUNDIAL_REDIS_ADDR"], []string{be.RedisAddr})
	if err := errors.Join(errs...); err != nil {
		return err
	}
	st, err := exec.CommandContext(ctx, s.Script, "status").CombinedOutput()
	if err != nil {
		return fmt.Errorf("chaos: %s status: not every backend is running and ready: %w\n%s", s.Script, err, st)
	}
	return nil
}

// Kill sends SIGKILL to backend (stack.sh kill).
func (s Stack) Kill(ctx context.Context, backend string) error {
	return s.run(ctx, "kill", backend)
}

// Up starts backend and returns once it serves requests (stack.sh up).
func (s Stack) Up(ctx context.Context, backend string) error {
	return s.run(ctx, "up", backend)
}

func (s Stack) run(ctx context.Context, verb, backend string) error {
	if !slices.Contains(StackBackends, backend) {
		return fmt.Errorf("chaos: backend %q: want one of %s", backend, strings.Join(StackBackends, ", "))
	}
	out, err := exec.CommandContext(ctx, s.Script, verb, backend).CombinedOutput()
	if err != nil {
		return fmt.Errorf("chaos: %s %s %s: %w\n%s", s.Script, verb, backend, err, out)
	}
	return nil
}

// parseExports reads "export NAME=value" lines.
func parseExports(b []byte) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "export "))
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = strings.Trim(v, `"'`)
		}
	}
	return m
}

// sameAddr compares host:port addresses, with localhost and 127.0.0.1 the
// same host.
func sameAddr(a, b string) bool {
	norm := func(s string) string { return strings.Replace(strings.TrimSpace(s), "localhost:", "127.0.0.1:", 1) }
	return a != "" && norm(a) == norm(b)
}

// chaos carries out the plan's kills from the start of the window: a
// process is killed with SIGKILL and restarted ProcessDown later; a backend
// is killed through the stack, left down BackendDown, and started again
// (its restart returns once it serves requests). Kills run one after the
// other: one that comes due while the previous is still under way runs
// late, at the time recorded. A process that is not running when its kill
// comes due (the supervisor is restarting it) is recorded as skipped.
func (b *Bench) chaos(ctx context.Context, cfg Config, kills []PlannedKill, procs *Processes, stack Stack, from time.Time) []CrashEvent {
	var out []CrashEvent
	for i, k := range kills {
		if !sleepUntil(ctx, from.Add(k.At)) {
			return out
		}
		ev := CrashEvent{Process: k.Target, Kind: "process", KilledAt: b.Now(), PlannedAt: from.Add(k.At)}
		if k.Backend {
			ev.Kind = "backend"
			b.say("chaos %d/%d: SIGKILL %s (backend)", i+1, len(kills), k.Target)
			if err := stack.Kill(ctx, k.Target); err != nil {
				ev.Error = err.Error()
				b.say("  %v", err)
				out = append(out, ev)
				continue
			}
			if !sleepUntil(ctx, ev.KilledAt.Add(cfg.ChaosBackendDown)) {
				return out
			}
			// Retry the start: a backend that does not come back would end
			// the run's meaning, so the bench keeps trying while the window
			// lasts and records how long it took.
			for attempt := 1; ; attempt++ {
				err := stack.Up(ctx, k.Target)
				if err == nil {
					break
				}
				b.say("  restart %s (attempt %d): %v", k.Target, attempt, err)
				if ctx.Err() != nil {
					return out
				}
				if attempt >= 3 {
					ev.Error = err.Error()
					break
				}
			}
			ev.Restarted = b.Now()
			b.say("  %s back after %.1fs", k.Target, ev.Restarted.Sub(ev.KilledAt).Seconds())
			out = append(out, ev)
			continue
		}
		if !procs.Running(k.Target) {
			ev.Error = "not running when its kill came due (being restarted by the supervisor); skipped"
			b.say("chaos %d/%d: %s %s", i+1, len(kills), k.Target, ev.Error)
			out = append(out, ev)
			continue
		}
		if err := procs.Kill(k.Target); err != nil {
			ev.Error = err.Error()
			b.say("chaos %d/%d: %v", i+1, len(kills), err)
			out = append(out, ev)
			continue
		}
		b.say("chaos %d/%d: SIGKILL %s", i+1, len(kills), k.Target)
		if !sleepUntil(ctx, ev.KilledAt.Add(cfg.ChaosProcessDown)) {
			return out
		}
		if err := procs.Restart(k.Target); err != nil {
			ev.Error = err.Error()
			b.say("  restart %s: %v", k.Target, err)
		}
		ev.Restarted = b.Now()
		out = append(out, ev)
	}
	return out
}

// CheckCommitLog refuses a Cassandra that may lose acknowledged writes when
// it is killed: Sundial treats an acknowledged write as durable, and a
// node that syncs its commit log periodically (Cassandra's default)
// acknowledges writes a SIGKILL then loses. A chaos run against it measures
// that node's setting, not Sundial (the stack's cassandra.yaml sets batch;
// a node started before that change keeps periodic until restarted).
func CheckCommitLog(ctx context.Context, hosts []string) error {
	s, err := cassandraSession(hosts)
	if err != nil {
		return fmt.Errorf("chaos: cassandra at %v: %w", hosts, err)
	}
	defer s.Close()
	var mode string
	if err := s.Query("SELECT value FROM system_views.settings WHERE name = 'commitlog_sync'").WithContext(ctx).Scan(&mode); err != nil {
		return fmt.Errorf("chaos: read commitlog_sync of cassandra at %v: %w", hosts, err)
	}
	return commitLogDurable(mode)
}

// commitLogDurable says whether a commitlog_sync mode acknowledges only
// writes that survive the process's death.
func commitLogDurable(mode string) error {
	switch mode {
	case "batch", "group":
		return nil
	}
	return fmt.Errorf("chaos: cassandra commitlog_sync is %q: it acknowledges writes a SIGKILL loses, "+
		"so killing it loses runs whatever Sundial does; restart it with the stack's config "+
		"(deploy/local/stack.sh down cassandra && deploy/local/stack.sh up cassandra), or leave it out of --chaos-backends", mode)
}
