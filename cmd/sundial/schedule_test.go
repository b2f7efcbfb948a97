package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSchedulePreview(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		code    int
		stdout  string
		inError string
	}{
		{
			// Berlin's 2026-03-29 has no 02:30: skipped.
			name: "cron skip",
			args: []string{"30 2 * * *", "--tz", "Europe/Berlin", "-n", "3", "--from", "2026-03-28T00:00:00Z", "--nonexistent", "skip"},
			stdout: "2026-03-28T02:30:00+01:00 CET    2026-03-28T01:30:00Z\n" +
				"2026-03-30T02:30:00+02:00 CEST   2026-03-30T00:30:00Z\n" +
				"2026-03-31T02:30:00+02:00 CEST   2026-03-31T00:30:00Z\n",
		},
		{
			// Shifted forward by the gap: 03:30 CEST.
			name: "cron shift",
			args: []string{"30 2 * * *", "--tz", "Europe/Berlin", "--count", "2", "--from", "2026-03-28T12:00:00Z", "--nonexistent", "shift"},
			stdout: "2026-03-29T03:30:00+02:00 CEST   2026-03-29T01:30:00Z\n" +
				"2026-03-30T02:30:00+02:00 CEST   2026-03-30T00:30:00Z\n",
		},
		{
			name: "cron both",
			args: []string{"30 2 * * *", "--tz", "Europe/Berlin", "-n", "2", "--from", "2026-10-24T12:00:00Z", "--ambiguous", "both"},
			stdout: "2026-10-25T02:30:00+02:00 CEST   2026-10-25T00:30:00Z\n" +
				"2026-10-25T02:30:00+01:00 CET    2026-10-25T01:30:00Z\n",
		},
		{
			name:   "interval with offset",
			args:   []string{"90m", "--kind", "interval", "--offset", "15m", "-n", "2", "--from", "2026-01-01T00:00:00Z"},
			stdout: "2026-01-01T00:15:00Z      UTC    2026-01-01T00:15:00Z\n2026-01-01T01:45:00Z      UTC    2026-01-01T01:45:00Z\n",
		},
		{
			name:   "at",
			args:   []string{"2026-03-29T03:30:00+02:00", "--kind", "at", "--tz", "Asia/Kathmandu", "--from", "2026-01-01T00:00:00Z"},
			stdout: "2026-03-29T07:15:00+05:45 +0545  2026-03-29T01:30:00Z\n",
		},
		{
			name:   "delay",
			args:   []string{"10m", "--kind", "delay", "--from", "2026-01-01T00:00:00Z"},
			stdout: "2026-01-01T00:10:00Z      UTC    2026-01-01T00:10:00Z\n",
		},
		{
			name:   "immediate",
			args:   []string{"--kind", "immediate", "--from", "2026-01-01T00:00:00Z"},
			stdout: "2026-01-01T00:00:00Z      UTC    2026-01-01T00:00:00Z\n",
		},
		{name: "unknown zone", args: []string{"@daily", "--tz", "Mars/Olympus"}, code: 1, inError: `schedule.time_zone: unknown time zone "Mars/Olympus"`},
		{name: "never fires", args: []string{"0 0 30 2 *"}, code: 1, inError: "schedule.cron.expression: never fires"},
		{name: "unquoted cron", args: []string{"0", "0", "*", "*", "*"}, code: 1, inError: "quote a cron expression"},
		{name: "bad policy", args: []string{"@daily", "--ambiguous", "last"}, code: 1, inError: "--ambiguous"},
		{name: "bad from", args: []string{"@daily", "--from", "yesterday"}, code: 1, inError: "--from"},
		{name: "bad count", args: []string{"@daily", "-n", "0"}, code: 1, inError: "--count"},
		{name: "start with cron", args: []string{"@daily", "--start", "2026-01-01T00:00:00Z"}, code: 1, inError: "schedule.interval.start: not used"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			code := run(context.Background(), append([]string{"sundial", "schedule", "preview"}, tc.args...), &out, &errOut)
			assert.Equal(t, tc.code, code, errOut.String())
			if tc.code == 0 {
				assert.Equal(t, tc.stdout, out.String())
			} else {
				assert.Contains(t, errOut.String(), tc.inError)
			}
		})
	}
}

func TestSchedulePreviewFromEnvironment(t *testing.T) {
	t.Setenv("SUNDIAL_TZ", "Australia/Lord_Howe")
	t.Setenv("SUNDIAL_FROM", "2026-10-02T00:00:00Z")
	t.Setenv("SUNDIAL_COUNT", "1")
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"sundial", "schedule", "preview", "@daily"}, &out, &errOut)
	assert.Equal(t, 0, code, errOut.String())
	assert.Equal(t, "2026-10-03T00:00:00+10:30 +1030  2026-10-02T13:30:00Z\n", out.String())
}

func TestSchedulePreviewPrintsPolicyInForce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"30 2 * * *", "-n", "1"}, "in force: time zone UTC (default); DST: nonexistent times shift_forward (default), ambiguous times first (default)\n"},
		{[]string{"30 2 * * *", "-n", "1", "--tz", "Europe/Berlin", "--nonexistent", "skip"},
			"in force: time zone Europe/Berlin; DST: nonexistent times skip, ambiguous times first (default)\n"},
		{[]string{"90m", "--kind", "interval", "-n", "1"}, "in force: time zone UTC (default); DST: no effect (interval schedules fire at absolute instants)\n"},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append([]string{"sundial", "schedule", "preview"}, tc.args...), &out, &errOut)
		assert.Equal(t, 0, code, errOut.String())
		assert.Equal(t, tc.want, errOut.String(), "%v", tc.args)
		assert.NotContains(t, out.String(), "in force", "standard output is the fire times alone")
	}
}
