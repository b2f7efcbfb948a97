package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/internal/telemetry"
)

func TestNewLoggerJSONCarriesRunIDs(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log, err := telemetry.NewLogger(&buf, telemetry.LogConfig{Format: "JSON", Level: "warn"})
	require.NoError(t, err)

	log.Info("dropped: below the level")
	ctx := telemetry.ContextWithRun(context.Background(), "billing", "billing@1700000000000")
	log.WarnContext(ctx, "lease lost", "attempt", 2)
	telemetry.WithRun(log, "reports", "").Error("failed")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2, buf.String())
	var first, second map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &first))
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &second))
	assert.Equal(t, "WARN", first["level"])
	assert.Equal(t, "lease lost", first["msg"])
	assert.Equal(t, "billing", first[telemetry.KeyJobID])
	assert.Equal(t, "billing@1700000000000", first[telemetry.KeyRunID])
	assert.EqualValues(t, 2, first["attempt"])
	assert.Equal(t, "reports", second[telemetry.KeyJobID])
	assert.NotContains(t, second, telemetry.KeyRunID, "an empty id is left out")
}

func TestNewLoggerTextDefaults(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log, err := telemetry.NewLogger(&buf, telemetry.LogConfig{})
	require.NoError(t, err)
	log.Debug("hidden")
	log.With("component", "runner").InfoContext(telemetry.ContextWithRun(t.Context(), "j", "j@1"), "started")
	out := buf.String()
	assert.NotContains(t, out, "hidden")
	assert.Contains(t, out, "level=INFO msg=started component=runner job_id=j run_id=j@1\n")
}

func TestLogConfigValidateReportsEveryField(t *testing.T) {
	t.Parallel()
	err := telemetry.LogConfig{Format: "yaml", Level: "loud"}.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `format: "yaml"`)
	assert.Contains(t, err.Error(), `level: "loud"`)
	require.NoError(t, telemetry.LogConfig{Format: "text", Level: "debug"}.Validate())
	require.NoError(t, telemetry.LogConfig{Level: "INFO+2"}.Validate())
}
