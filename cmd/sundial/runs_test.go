package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v3"

	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/memory"
)

func TestPrintRuns(t *testing.T) {
	t.Parallel()
	st, err := memory.New(memory.Options{})
	require.NoError(t, err)
	ctx := context.Background()
	due := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	runID := store.RunID("report", due)
	for _, r := range []store.RunRecord{
		{JobID: "report", RunID: runID, Attempt: 1, Due: due, State: store.StateFailed, Started: due, Duration: 40 * time.Millisecond, Error: "http_503", UpdatedAt: due.Add(time.Second)},
		{JobID: "report", RunID: runID, Attempt: 2, Due: due, AttemptDue: due.Add(2 * time.Second), State: store.StateSucceeded, Started: due.Add(2 * time.Second), Duration: 15 * time.Millisecond, UpdatedAt: due.Add(3 * time.Second)},
	} {
		require.NoError(t, st.RecordRun(ctx, r))
	}
	var out bytes.Buffer
	cmd := &cli.Command{Writer: &out}
	require.NoError(t, printRuns(ctx, emitter{w: cmd.Root().Writer, form: outputTable}, storeRuns{st}, "report", 10, runFilter{}))
	s := out.String()
	assert.Contains(t, s, "job report: 1 run(s), 2 attempt(s), 1 failure(s)")
	assert.Contains(t, s, "RUN ID")
	assert.Contains(t, s, "http_503")
	assert.Contains(t, s, "15ms")
	assert.Regexp(t, `report@\d+\s+2\s+succeeded`, s)
}

func TestParseWhen(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in      string
		want    time.Time
		wantErr bool
	}{
		{"", time.Time{}, false},
		{"24h", now.Add(-24 * time.Hour), false},
		{"2026-05-31T00:00:00Z", time.Date(2026, 5, 31, 0, 0, 0, 0, time.UTC), false},
		{"-1h", time.Time{}, true},
		{"yesterday", time.Time{}, true},
	}
	for _, tt := range tests {
		got, err := parseWhen("since", tt.in, now)
		if tt.wantErr {
			assert.ErrorContains(t, err, "--since", tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		assert.True(t, tt.want.Equal(got), tt.in)
	}
}

func TestRunnerCommandReportsEveryMissingFlag(t *testing.T) {
	for _, env := range []string{"SUNDIAL_KAFKA_BROKERS", "SUNDIAL_REDIS_ADDR", "SUNDIAL_CASSANDRA_HOSTS"} {
		t.Setenv(env, "") // restored after the test
		require.NoError(t, os.Unsetenv(env))
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"sundial", "runner", "--concurrency", "-1"}, &out, &errOut)
	assert.Equal(t, 1, code)
	for _, want := range []string{"--kafka-brokers", "--redis-addr", "--cassandra-hosts", "Concurrency"} {
		assert.Contains(t, errOut.String(), want)
	}
}

func TestPrintRunShowsEveryAttemptWithItsLog(t *testing.T) {
	t.Parallel()
	st, err := memory.New(memory.Options{})
	require.NoError(t, err)
	ctx := context.Background()
	due := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	runID := store.RunID("billing.invoice", due)
	for _, r := range []store.RunRecord{
		{JobID: "billing.invoice", RunID: runID, Attempt: 1, Due: due, State: store.StateFailed, Started: due, Duration: 40 * time.Millisecond,
			Error: "handler_error: ledger unavailable", Log: []string{"level=INFO msg=\"invoicing 3 lines\""}, UpdatedAt: due.Add(time.Second)},
		{JobID: "billing.invoice", RunID: runID, Attempt: 2, Due: due, AttemptDue: due.Add(2 * time.Second), State: store.StateSucceeded,
			Started: due.Add(2 * time.Second), Duration: 15 * time.Millisecond, Log: []string{"level=INFO msg=\"progress 3/3\""}, UpdatedAt: due.Add(3 * time.Second)},
		{JobID: "billing.invoice", RunID: store.RunID("billing.invoice", due.Add(time.Hour)), Attempt: 1, Due: due.Add(time.Hour), State: store.StateScheduled, UpdatedAt: due},
	} {
		require.NoError(t, st.RecordRun(ctx, r))
	}
	var out bytes.Buffer
	cmd := &cli.Command{Writer: &out}
	require.NoError(t, printRun(ctx, emitter{w: cmd.Root().Writer, form: outputTable}, storeRuns{st}, "billing.invoice", runID, 10))
	s := out.String()
	assert.Contains(t, s, "run "+runID+" of job billing.invoice")
	first, second := strings.Index(s, "attempt 1: failed"), strings.Index(s, "attempt 2: succeeded")
	require.True(t, first >= 0 && second > first, "attempts in order:\n%s", s)
	assert.Contains(t, s, "error: handler_error: ledger unavailable")
	assert.Contains(t, s, `    level=INFO msg="invoicing 3 lines"`)
	assert.Contains(t, s, `    level=INFO msg="progress 3/3"`)
	assert.NotContains(t, s, "scheduled")

	err = printRun(ctx, emitter{w: cmd.Root().Writer, form: outputTable}, storeRuns{st}, "billing.invoice", store.RunID("billing.invoice", due.Add(-time.Hour)), 10)
	assert.ErrorContains(t, err, "not in the newest 10 attempts")

	_, _, err = splitRunID("no-at-sign")
	assert.ErrorContains(t, err, "RUN_ID")
	job, at, err := splitRunID("team@host.job@1767148200000")
	require.NoError(t, err)
	assert.Equal(t, "team@host.job", job)
	assert.Equal(t, int64(1767148200000), at.UnixMilli())
}

// TestPrintTeamRunsLateBy: runs list without --job lists a team's runs of
// every job, and --late-by keeps those that started at least that late,
// with the LATE BY and REASON columns; runs get prints the timeline.
func TestPrintTeamRunsLateBy(t *testing.T) {
	t.Parallel()
	st, err := memory.New(memory.Options{})
	require.NoError(t, err)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	due := now.Add(-10 * time.Minute)
	late := store.RunRecord{JobID: "billing.tick", RunID: store.RunID("billing.tick", due), Attempt: 1, Due: due, State: store.StateSucceeded,
		Started: due.Add(20 * time.Second), Duration: time.Millisecond, UpdatedAt: due.Add(21 * time.Second), OwnerTeam: "billing",
		WaitReason: "no_executor", Dispatched: due.Add(5 * time.Millisecond), Received: due.Add(19 * time.Second), Leased: due.Add(19*time.Second + 500*time.Millisecond)}
	onTime := store.RunRecord{JobID: "billing.other", RunID: store.RunID("billing.other", due), Attempt: 1, Due: due, State: store.StateSucceeded,
		Started: due.Add(10 * time.Millisecond), Duration: time.Millisecond, UpdatedAt: due.Add(time.Second), OwnerTeam: "billing"}
	elsewhere := store.RunRecord{JobID: "search.tick", RunID: store.RunID("search.tick", due), Attempt: 1, Due: due, State: store.StateSucceeded,
		Started: due.Add(30 * time.Second), UpdatedAt: due.Add(31 * time.Second), OwnerTeam: "search", WaitReason: "backlog"}
	require.NoError(t, st.RecordRuns(ctx, []store.RunRecord{late, onTime, elsewhere}))

	var out bytes.Buffer
	f := runFilter{team: "billing", since: now.Add(-time.Hour), now: now}
	require.NoError(t, printTeamRuns(ctx, emitter{w: &out, form: outputTable}, storeRuns{st}, 20, f))
	s := out.String()
	assert.Contains(t, s, "LATE BY")
	assert.Contains(t, s, "REASON")
	assert.Contains(t, s, late.RunID)
	assert.Contains(t, s, onTime.RunID)
	assert.NotContains(t, s, elsewhere.RunID, "another team's run")

	out.Reset()
	f.lateBy = 5 * time.Second
	require.NoError(t, printTeamRuns(ctx, emitter{w: &out, form: outputTable}, storeRuns{st}, 20, f))
	s = out.String()
	assert.Regexp(t, `billing\.tick\s+`+late.RunID+`\s+1\s+succeeded\s+\S+\s+\S+\s+20s\s+no executor`, s)
	assert.NotContains(t, s, onTime.RunID)

	out.Reset()
	require.NoError(t, printRun(ctx, emitter{w: &out, form: outputTable}, storeRuns{st}, late.JobID, late.RunID, 10))
	s = out.String()
	for _, want := range []string{"timeline:", "dispatched", "+5ms", "received", "+18.995s", "leased", "+500ms", "started", "reason: no executor"} {
		assert.Contains(t, s, want)
	}

	err = printTeamRuns(ctx, emitter{w: &out, form: outputTable}, storeRuns{st}, 20, runFilter{now: now})
	assert.ErrorContains(t, err, "--team: required")
}
