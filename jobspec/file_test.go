package jobspec_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

func decodeFile(t *testing.T, in string) (specs []*sundialv1.JobSpec, errs []error) {
	t.Helper()
	for spec, err := range jobspec.DecodeFile(strings.NewReader(in)) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		specs = append(specs, spec)
	}
	return specs, errs
}

// TestDecodeFileReadableForms: short enum names in any case, Go and ISO
// 8601 durations are read in JSON and YAML files alike, and mean what the
// protobuf JSON form means; that form keeps working as it is.
func TestDecodeFileReadableForms(t *testing.T) {
	t.Parallel()
	const protoJSON = `{"id": "t.j", "ownerTeam": "t", "overlapPolicy": "OVERLAP_POLICY_FORBID", "timeout": "3600s",
		"schedule": {"interval": {"every": "5400s"}, "timeZone": "UTC", "misfirePolicy": "MISFIRE_POLICY_FIRE_ONCE",
		"dst": {"nonexistent": "NONEXISTENT_TIME_POLICY_SHIFT_FORWARD"}},
		"retry": {"maxAttempts": 3, "initialBackoff": "0.250s"}, "target": {"handler": {"name": "noop"}}}`
	want, errs := decodeFile(t, protoJSON)
	require.Empty(t, errs)
	require.Len(t, want, 1)

	tests := []struct{ name, in string }{
		{"protobuf JSON", protoJSON},
		{"JSON short names and Go durations", `{"id": "t.j", "ownerTeam": "t", "overlapPolicy": "FORBID", "timeout": "1h",
			"schedule": {"interval": {"every": "1h30m"}, "timeZone": "UTC", "misfirePolicy": "fire_once",
			"dst": {"nonexistent": "shift-forward"}},
			"retry": {"maxAttempts": 3, "initialBackoff": "250ms"}, "target": {"handler": {"name": "noop"}}}`},
		{"JSON ISO durations", `{"id": "t.j", "ownerTeam": "t", "overlapPolicy": "Forbid", "timeout": "PT1H",
			"schedule": {"interval": {"every": "PT1H30M"}, "timeZone": "UTC", "misfirePolicy": "FIRE_ONCE",
			"dst": {"nonexistent": "SHIFT_FORWARD"}},
			"retry": {"maxAttempts": 3, "initialBackoff": "PT0.25S"}, "target": {"handler": {"name": "noop"}}}`},
		{"YAML readable", `
id: t.j
owner_team: t
overlapPolicy: forbid
timeout: 1h
schedule:
  interval:
    every: PT1H30M
  timeZone: UTC
  misfirePolicy: FIRE_ONCE
  dst:
    nonexistent: shift_forward
retry:
  maxAttempts: 3
  initialBackoff: 250ms
target:
  handler:
    name: noop
`},
		{"YAML protobuf form", `
id: t.j
ownerTeam: t
overlapPolicy: OVERLAP_POLICY_FORBID
timeout: 3600s
schedule:
  interval: {every: 5400s}
  timeZone: UTC
  misfirePolicy: MISFIRE_POLICY_FIRE_ONCE
  dst: {nonexistent: NONEXISTENT_TIME_POLICY_SHIFT_FORWARD}
retry: {maxAttempts: 3, initialBackoff: 0.250s}
target: {handler: {name: noop}}
`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, errs := decodeFile(t, tc.in)
			require.Empty(t, errs)
			require.Len(t, got, 1)
			assert.True(t, proto.Equal(want[0], got[0]), "got %v\nwant %v", got[0], want[0])
		})
	}
	assert.Equal(t, time.Hour, want[0].GetTimeout().AsDuration())
	assert.Equal(t, sundialv1.OverlapPolicy_OVERLAP_POLICY_FORBID, want[0].GetOverlapPolicy())
}

// TestDecodeFileErrors: a YAML definition's problems are reported all at
// once, each with its line in the file.
func TestDecodeFileErrors(t *testing.T) {
	t.Parallel()
	in := `id: t.ok
ownerTeam: t
target: {handler: {name: noop}}
---
id: t.bad
ownerTeem: t
overlapPolicy: sometimes
timeout: 90
schedule:
  interval:
    every: P1M
  timeZone: UTC
retry:
  nonRetryableErrors: http_400
target: {handler: {name: noop}}
`
	specs, errs := decodeFile(t, in)
	require.Len(t, specs, 1)
	require.Len(t, errs, 1)
	var fe *jobspec.FileError
	require.True(t, errors.As(errs[0], &fe))
	assert.Equal(t, 2, fe.Definition)
	msg := errs[0].Error()
	for _, want := range []string{
		"definition 2: 5 problems:",
		"line 6: ownerTeem: unknown field (did you mean ownerTeam?)",
		`line 7: overlapPolicy: "sometimes" is not one of`,
		"FORBID",
		"line 8: timeout: want a duration",
		"line 11: schedule.interval.every: duration \"P1M\": months are not supported",
		"line 14: retry.nonRetryableErrors: want a list",
	} {
		assert.Contains(t, msg, want)
	}
}

func TestParseReadableDuration(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want, err string }{
		{in: "3600s", want: "3600s"},
		{in: "1.5s", want: "1.5s"},
		{in: "0.250s", want: "0.25s"},
		{in: "1h", want: "3600s"},
		{in: "1h30m", want: "5400s"},
		{in: "250ms", want: "0.25s"},
		{in: "-5s", want: "-5s"},
		{in: "PT1H", want: "3600s"},
		{in: "pt1h30m", want: "5400s"},
		{in: "P1DT2H", want: "93600s"},
		{in: "PT0.5S", want: "0.5s"},
		{in: "PT1,5S", want: "1.5s"},
		{in: "315576000000s", want: "315576000000s"},
		{in: "", err: "empty duration"},
		{in: "P", err: "at least one number"},
		{in: "PT", err: "at least one number"},
		{in: "P1M", err: "months are not supported"},
		{in: "P1Y", err: "years and weeks"},
		{in: "PT1S1H", err: "out of order"},
		{in: "1 hour", err: "want one such as"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, err := jobspec.ParseReadableDuration(tc.in)
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestDecodeFileDocsExample: the YAML example of docs/job-definition.md
// decodes and is valid.
func TestDecodeFileDocsExample(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/job-definition.md")
	require.NoError(t, err)
	_, after, ok := strings.Cut(string(doc), "The same definition in YAML's readable form:\n\n```yaml\n")
	require.True(t, ok, "the example is in the docs")
	block, _, ok := strings.Cut(after, "```")
	require.True(t, ok)
	specs, errs := decodeFile(t, block)
	require.Empty(t, errs)
	require.Len(t, specs, 1)
	assert.Empty(t, jobspec.Validate(specs[0]))
	assert.Equal(t, time.Hour, specs[0].GetSchedule().GetCatchUpWindow().AsDuration())
	assert.Equal(t, sundialv1.OverlapPolicy_OVERLAP_POLICY_FORBID, specs[0].GetOverlapPolicy())

	// The error shown there is the one printed.
	_, errs = decodeFile(t, "id: t.a\nownerTeam: t\ntarget: {handler: {name: noop}}\n---\nid: t.bad\nownerTeem: t\noverlapPolicy: sometimes\ntimeout: 90\n")
	require.Len(t, errs, 1)
	want := `definition 2: 3 problems:
  line 6: ownerTeem: unknown field (did you mean ownerTeam?)
  line 7: overlapPolicy: "sometimes" is not one of ALLOW, FORBID, QUEUE, REPLACE
  line 8: timeout: want a duration such as "90s", "1h30m" or "PT1H30M", got the number 90`
	assert.Equal(t, want, errs[0].Error())
	assert.Contains(t, string(doc), "c.yaml: "+want)
}
