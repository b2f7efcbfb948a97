package runner

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// The trigger latency is counted by priority and by owning team, and a
// team's series carries the run id as its exemplar, or the job id when the
// run id is too long for one, or none: an exemplar over Prometheus's limit
// would panic in the middle of a run.
func TestTriggerLatencyByTeamWithTheRunAsExemplar(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := newMetrics(reg)
	require.NoError(t, err)
	longJob := strings.Repeat("j", 115) // its run id is 129 characters
	tooLong := strings.Repeat("j", 200)
	for _, c := range []struct {
		run     *sundialv1.Run
		latency time.Duration
	}{
		{&sundialv1.Run{RunId: "billing.invoice@1700000000000", JobId: "billing.invoice", OwnerTeam: "billing"}, 2 * time.Second},
		{&sundialv1.Run{RunId: longJob + "@1700000000000", JobId: longJob, OwnerTeam: "reports"}, 100 * time.Millisecond},
		{&sundialv1.Run{RunId: tooLong + "@1700000000000", JobId: tooLong, OwnerTeam: "reports"}, -time.Second},
	} {
		assert.NotPanics(t, func() { m.observeTriggerLatency(c.run, c.latency) })
	}

	byTeam := map[string]*dto.Histogram{}
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "sundial_runner_team_trigger_latency_seconds" {
			continue
		}
		for _, s := range f.GetMetric() {
			byTeam[s.GetLabel()[0].GetValue()] = s.GetHistogram()
		}
	}
	require.Contains(t, byTeam, "billing")
	require.Contains(t, byTeam, "reports")
	assert.Equal(t, uint64(1), byTeam["billing"].GetSampleCount())
	assert.Equal(t, uint64(2), byTeam["reports"].GetSampleCount(), "a negative latency counts as 0")

	exemplars := func(h *dto.Histogram) map[string]string {
		out := map[string]string{}
		for _, b := range h.GetBucket() {
			for _, l := range b.GetExemplar().GetLabel() {
				out[l.GetName()] = l.GetValue()
			}
		}
		return out
	}
	assert.Equal(t, map[string]string{"run_id": "billing.invoice@1700000000000"}, exemplars(byTeam["billing"]), "the run id is the exemplar")
	assert.Equal(t, map[string]string{"job_id": longJob}, exemplars(byTeam["reports"]),
		"a run id too long for an exemplar gives way to its job id; one too long for either leaves none")
}
