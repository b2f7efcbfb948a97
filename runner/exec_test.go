package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/egress"
	"github.com/sundialhq/sundial/runner/target"
)

// script writes an executable shell script into dir and returns its path.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
	return path
}

// lastEvent returns run's last event in state, nil if none.
func lastEvent(h *harness, runID string, state sundialv1.RunState) *sundialv1.RunEvent {
	var out *sundialv1.RunEvent
	for _, ev := range h.events.all() {
		if ev.GetRunId() == runID && ev.GetState() == state {
			out = ev
		}
	}
	return out
}

// TestExecTarget runs exec targets through a runner on the real stack: an
// allowed command gets the payload on stdin and the run's identity in its
// environment, and its output is on the final event; a command the runner
// does not allow is dead-lettered at once with the reason; a command that
// writes more than the cap has its output cut and says so; a command that
// outlives the job's timeout is killed and times out.
func TestExecTarget(t *testing.T) {
	t.Parallel()
	h := newHarness(t, realBackends(t, 2), steadyTTL)
	dir := t.TempDir()
	const maxOutput = 4096
	exe, err := target.NewExec(target.ExecConfig{
		Allowed: map[string]string{
			"greet":  script(t, dir, "greet.sh", `echo "hello $(cat) from $SUNDIAL_JOB_ID attempt $SUNDIAL_ATTEMPT token $SUNDIAL_FENCING_TOKEN"; echo "to stderr" >&2`),
			"chatty": script(t, dir, "chatty.sh", `i=0; while [ $i -lt 2000 ]; do echo "line $i of a chatty command"; i=$((i+1)); done`),
			"sleepy": script(t, dir, "sleepy.sh", `echo "going to sleep"; exec sleep 60`),
			"fails":  script(t, dir, "fails.sh", `echo "about to fail"; exit 3`),
		},
		MaxOutput: maxOutput,
	})
	require.NoError(t, err)
	h.start(func(c *Config) {
		c.Exec = exe
		c.Egress.Add(egress.Scope{Team: egress.EveryTeam}, egress.Rules{Exec: []string{"greet", "chatty", "sleepy", "fails"}})
	})

	execRun := func(job, command string, mod func(*sundialv1.Run)) *sundialv1.Run {
		return h.run(job, time.Now(), func(r *sundialv1.Run) {
			r.Target = &sundialv1.Target{Kind: &sundialv1.Target_Exec{Exec: &sundialv1.ExecTarget{Command: command}}}
			r.Retry = &sundialv1.RetryPolicy{MaxAttempts: 1}
			if mod != nil {
				mod(r)
			}
		})
	}
	greet := execRun("exec-greet", "greet", func(r *sundialv1.Run) { r.Payload = []byte("world") })
	refused := execRun("exec-refused", "rm-rf", nil)
	chatty := execRun("exec-chatty", "chatty", nil)
	sleepy := execRun("exec-sleepy", "sleepy", func(r *sundialv1.Run) { r.Timeout = durationpb.New(time.Second) })
	fails := execRun("exec-fails", "fails", nil)
	h.produce(greet, refused, chatty, sleepy, fails)

	waitStates(t, h, greet.GetRunId(), started, succeeded)
	log := lastEvent(h, greet.GetRunId(), succeeded).GetLog()
	require.Len(t, log, 2, "log %q", log)
	assert.Regexp(t, `^hello world from exec-greet attempt 1 token [1-9][0-9]*$`, log[0])
	assert.Equal(t, "to stderr", log[1])

	waitStates(t, h, refused.GetRunId(), started, failed, dead)
	deadEv := lastEvent(h, refused.GetRunId(), dead)
	assert.Equal(t, target.CodeExecNotAllowed, deadEv.GetError().GetCode())
	assert.False(t, deadEv.GetError().GetRetryable())
	assert.Contains(t, deadEv.GetError().GetMessage(), `"rm-rf" is not allowed`)

	waitStates(t, h, chatty.GetRunId(), started, succeeded)
	log = lastEvent(h, chatty.GetRunId(), succeeded).GetLog()
	require.NotEmpty(t, log)
	kept := 0
	for _, l := range log {
		kept += len(l) + 1
	}
	assert.LessOrEqual(t, kept, maxOutput+200, "the captured output stays within the cap (plus the truncation note)")
	assert.Equal(t, "line 0 of a chatty command", log[0], "the cap keeps the start of the output")
	assert.True(t, strings.HasPrefix(log[len(log)-1], "… output truncated: "), "last line %q", log[len(log)-1])

	waitStates(t, h, sleepy.GetRunId(), started, timedOut, dead)
	assert.Equal(t, []string{"going to sleep"}, lastEvent(h, sleepy.GetRunId(), timedOut).GetLog())

	waitStates(t, h, fails.GetRunId(), started, failed, dead)
	failEv := lastEvent(h, fails.GetRunId(), failed)
	assert.Equal(t, target.CodeExecExit, failEv.GetError().GetCode())
	assert.Contains(t, failEv.GetError().GetMessage(), "exit status 3")
	assert.Equal(t, []string{"about to fail"}, failEv.GetLog())
}
