package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/audit"
)

func TestParseSince(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	got, err := parseSince("24h", now)
	require.NoError(t, err)
	assert.Equal(t, now.Add(-24*time.Hour), got)
	got, err = parseSince("2026-11-01T00:00:00Z", now)
	require.NoError(t, err)
	assert.Equal(t, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), got)
	got, err = parseSince("", now)
	require.NoError(t, err)
	assert.True(t, got.IsZero())
	for _, bad := range []string{"-1h", "yesterday", "0s"} {
		_, err := parseSince(bad, now)
		assert.ErrorContains(t, err, "--since", bad)
	}
}

func TestPrintAudit(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	require.NoError(t, printAudit(&b, []audit.Record{{
		At: time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC), Action: audit.ActionJobUpdated, Subject: "j", Team: "a",
		Actor: "kafka:sundial.jobs.a", RevisionBefore: 3, RevisionAfter: 9,
		Changes: []audit.Change{{Field: "paused", After: "true"}},
	}}))
	assert.Equal(t, "2026-11-25T03:00:00Z  job.updated  j  team a  by kafka:sundial.jobs.a  revision 3 -> 9\n    paused: - -> true\n", b.String())
	b.Reset()
	require.NoError(t, printAudit(&b, nil))
	assert.Equal(t, "no audit records\n", b.String())
}
