package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// flaky fails until its n-th call, then answers.
func flaky(n int, failure error) (probeFunc, *int) {
	calls := 0
	return func(ctx context.Context, addr string) (string, error) {
		calls++
		if calls < n {
			return "", failure
		}
		return "version 1", nil
	}, &calls
}

func TestWait(t *testing.T) {
	t.Parallel()
	refused := errors.New("connection refused")
	opts := waitOptions{
		timeout:      10 * time.Second,
		interval:     700 * time.Millisecond,
		probeTimeout: time.Second,
		progress:     3 * time.Second,
	}
	tests := []struct {
		name        string
		readyAfter  int // probe call that succeeds
		alive       func(pid int) bool
		wantErr     error
		wantCalls   int
		wantElapsed time.Duration
		wantReports int
	}{
		{name: "ready at once", readyAfter: 1, wantCalls: 1},
		{name: "ready after retries", readyAfter: 4, wantCalls: 4, wantElapsed: 2100 * time.Millisecond},
		// Failures at 0s, 0.7s, ... 4.9s: the one at 3.5s is the first past 3s.
		{name: "progress reported while waiting", readyAfter: 9, wantCalls: 9, wantElapsed: 5600 * time.Millisecond, wantReports: 1},
		// Probes at 0s ... 9.8s, reports at 3.5s and 7s.
		{name: "times out", readyAfter: 1000, wantErr: errTimeout, wantCalls: 15, wantElapsed: 10 * time.Second, wantReports: 2},
		{
			name: "process exits", readyAfter: 1000, wantErr: errExited, wantCalls: 2, wantElapsed: 1400 * time.Millisecond,
			alive: func() func(int) bool {
				checks := 0
				return func(int) bool { checks++; return checks <= 2 }
			}(),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				probe, calls := flaky(tc.readyAfter, refused)
				o := opts
				o.alive = tc.alive
				var reports []string
				res := wait(t.Context(), target{name: "x", addr: "a:1", pid: 42, probe: probe}, o,
					func(s string) { reports = append(reports, s) })
				assert.Equal(t, tc.wantCalls, *calls, "probe calls")
				assert.Equal(t, tc.wantElapsed, res.elapsed)
				assert.Len(t, reports, tc.wantReports, "reports: %q", reports)
				if tc.wantErr == nil {
					require.NoError(t, res.err)
					assert.Equal(t, "version 1", res.detail)
					return
				}
				require.ErrorIs(t, res.err, tc.wantErr)
				require.ErrorIs(t, res.err, refused, "the last probe error is kept")
			})
		})
	}
}

func TestWaitSurvivesPanickingProbe(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		probe := func(context.Context, string) (string, error) {
			calls++
			var m map[string]int
			m["boom"]++ //nolint:staticcheck // a nil map write, as a buggy driver might do
			return "", nil
		}
		res := wait(t.Context(), target{name: "x", addr: "a:1", probe: probe},
			waitOptions{timeout: 2500 * time.Millisecond, interval: time.Second, probeTimeout: time.Second}, func(string) {})
		require.ErrorIs(t, res.err, errTimeout)
		assert.Contains(t, res.err.Error(), "probe panicked: assignment to entry in nil map")
		assert.Equal(t, 3, calls, "probing goes on after a panic")
	})
}

func TestWaitInterrupted(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		probe := func(context.Context, string) (string, error) {
			cancel()
			return "", errors.New("not yet")
		}
		res := wait(ctx, target{name: "x", addr: "a:1", probe: probe},
			waitOptions{timeout: time.Minute, interval: time.Second, probeTimeout: time.Second}, func(string) {})
		require.ErrorIs(t, res.err, errInterrupted)
		assert.Zero(t, res.elapsed)
	})
}

func TestWaitProbeTimeout(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var deadlines []time.Duration
		start := time.Now()
		probe := func(ctx context.Context, _ string) (string, error) {
			d, ok := ctx.Deadline()
			require.True(t, ok)
			deadlines = append(deadlines, d.Sub(start))
			<-ctx.Done() // a backend that never answers
			return "", ctx.Err()
		}
		res := wait(t.Context(), target{name: "x", addr: "a:1", probe: probe},
			waitOptions{timeout: 5 * time.Second, interval: time.Second, probeTimeout: 2 * time.Second}, func(string) {})
		require.ErrorIs(t, res.err, errTimeout)
		require.ErrorIs(t, res.err, context.DeadlineExceeded)
		// Probes at 0s and 3s get 2s each; the one at 6s never starts.
		assert.Equal(t, []time.Duration{2 * time.Second, 5 * time.Second}, deadlines)
	})
}

func TestRunUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{name: "no backend", args: nil, want: []string{"name at least one backend"}},
		{name: "bad durations", args: []string{"-redis", "a:1", "-timeout", "0s", "-interval", "-1s", "-progress", "-1s", "-probe-timeout", "0s"},
			want: []string{"-timeout: must be positive", "-interval: must be positive", "-progress: must not be negative", "-probe-timeout: must be positive"}},
		{name: "stray argument", args: []string{"-redis", "a:1", "kafka"}, want: []string{`unexpected arguments ["kafka"]`}},
		{name: "unknown flag", args: []string{"-mongo", "a:1"}, want: []string{"flag provided but not defined: -mongo"}},
		{name: "users without password files", args: []string{"-redis", "a:1", "-kafka-user", "u", "-cassandra-password-file", "f", "-redis-user", "u"},
			want: []string{"-kafka-user and -kafka-password-file: give both or neither", "-cassandra-user and -cassandra-password-file", "-redis-user and -redis-password-file"}},
		{name: "provisioning without a login", args: []string{"-kafka", "a:1", "-cassandra", "b:2", "-kafka-grant-user", "sundial", "-cassandra-role", "sundial", "-cassandra-new-password-file", "f"},
			want: []string{"-kafka-grant-user: needs -kafka and a super user", "-cassandra-role: needs -cassandra-role-password-file", "-cassandra-new-password-file: needs -cassandra and -cassandra-user"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			require.Equal(t, 2, run(tc.args, &stdout, &stderr))
			assert.Empty(t, stdout.String())
			for _, w := range tc.want {
				assert.Contains(t, stderr.String(), w)
			}
		})
	}
}

// TestRunReportsNotReady probes a port nobody listens on: the closed port
// must be reported as not ready with the dial error once the timeout passes.
// The timeout leaves a loaded machine time to finish at least one probe; a
// probe still out at the deadline does not hide that probe's error
// (TestWaitKeepsTheErrorOfTheLastFinishedProbe).
func TestRunReportsNotReady(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	addr := closedAddr(t)
	code := run([]string{"-redis", addr, "-timeout", "2s", "-interval", "50ms", "-progress", "0s"}, &stdout, &stderr)
	require.Equal(t, 1, code)
	assert.Empty(t, stdout.String())
	assert.Contains(t, stderr.String(), fmt.Sprintf("redis: not ready at %s after", addr))
	assert.Contains(t, stderr.String(), "connection refused")
}

// TestWaitKeepsTheErrorOfTheLastFinishedProbe: the overall timeout cuts the
// probe in flight; the report carries the error of the probe before it, not
// the deadline.
func TestWaitKeepsTheErrorOfTheLastFinishedProbe(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		refused := errors.New("connection refused")
		calls := 0
		probe := func(ctx context.Context, _ string) (string, error) {
			calls++
			if calls == 1 {
				return "", refused
			}
			<-ctx.Done() // a probe slower than what is left of the wait
			return "", fmt.Errorf("ping: %w", ctx.Err())
		}
		res := wait(t.Context(), target{name: "x", addr: "a:1", probe: probe},
			waitOptions{timeout: 3 * time.Second, interval: time.Second, probeTimeout: 10 * time.Second}, func(string) {})
		require.ErrorIs(t, res.err, errTimeout)
		require.ErrorIs(t, res.err, refused)
		assert.NotContains(t, res.err.Error(), "ping:")
		assert.Equal(t, 2, calls)
	})
}

func TestIsZombie(t *testing.T) {
	t.Parallel()
	tests := []struct {
		stat string
		want bool
	}{
		{"123 (java) S 1 2 3", false},
		{"123 (java) Z 1 2 3", true},
		{"123 (a) Z) S 1 2 3", false}, // a command name with ") Z" in it
		{"123 (x y) X 1", true},
		{"garbage", false},
	}
	for _, tc := range tests {
		t.Run(strings.ReplaceAll(tc.stat, " ", "_"), func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, isZombie(tc.stat))
		})
	}
}

// closedAddr returns a loopback address that nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}
