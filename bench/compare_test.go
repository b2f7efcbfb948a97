package bench

import (
	"bytes"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCompare(t *testing.T) {
	t.Parallel()
	a := sampleReport()
	a.Systems = a.Systems[:1]
	a.Systems[0].Trigger = Latency{P50Ms: 20, P95Ms: 100, P99Ms: 200}
	a.Systems[0].Dispatch = &Latency{P95Ms: 50}
	a.Systems[0].SustainedPerSec = 2000
	b := sampleReport()
	b.Systems = b.Systems[:1]
	b.Systems[0].Trigger = Latency{P50Ms: 20, P95Ms: 110, P99Ms: 180}
	b.Systems[0].SustainedPerSec = 1900
	b.Systems[0].Counts.Lost = 3
	a.Systems[0].CPUPerRun = &CPUPerRun{RunsPerSec: 2000, MachineMs: 1.9, SundialMs: 0.47}
	b.Systems[0].CPUPerRun = &CPUPerRun{RunsPerSec: 1900, MachineMs: 0.95, SundialMs: 0.3}
	b.Config.APIWatch = true
	b.APIWatch = &WatchStats{Messages: 500000, InWindow: 480000, InWindowPerSec: 4000}

	dirA, dirB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	require.NoError(t, a.Write(dirA))
	require.NoError(t, b.Write(dirB))
	ra, err := ReadReport(dirA)
	require.NoError(t, err)
	rb, err := ReadReport(dirB)
	require.NoError(t, err)

	figs := map[string]ComparedFigure{}
	for _, f := range CompareFigures(ra, rb) {
		figs[f.Name] = f
	}
	assert.InDelta(t, 0.95, figs["sustained triggers/s"].Ratio(), 1e-9)
	assert.InDelta(t, 0.05, figs["sustained triggers/s"].Worse(), 1e-9, "a lower rate is worse")
	assert.InDelta(t, 0.10, figs["trigger p95 (ms)"].Worse(), 1e-9, "a higher latency is worse")
	assert.InDelta(t, -0.10, figs["trigger p99 (ms)"].Worse(), 1e-9, "a lower latency is better")
	assert.True(t, math.IsNaN(figs["lost"].Ratio()), "no ratio to a count of zero")
	assert.Equal(t, 0.0, figs["dispatch p95 (ms)"].B, "B measured no dispatch latency")

	var out bytes.Buffer
	Compare(&out, dirA, ra, dirB, rb)
	s := out.String()
	for _, want := range []string{
		"- **A** `" + dirA + "`: peer, 2026-03-01 12:00:00 to 12:01:00; scenario peer",
		"  - API watch: 500000 messages received, 480000 during the window (4000/s)",
		"| figure | A | B | B / A | B worse by |",
		"| sustained triggers/s | 2000 | 1900 | 0.950 | +5.0 % |",
		"| trigger p95 (ms) | 100 | 110 | 1.100 | +10.0 % |",
		"| trigger p99 (ms) | 200 | 180 | 0.900 | -10.0 % |",
		"| lost | 0 | 3 | – | – |",
		"| machine CPU per run (ms) | 1.90 | 0.95 | 0.500 | -50.0 % |",
		"| Sundial's CPU per run (ms) | 0.47 | 0.30 | 0.638 | -36.2 % |",
	} {
		assert.Contains(t, s, want)
	}
	assert.NotContains(t, s, "workloads differ")

	rb.Workload.WindowTo = rb.Workload.WindowTo.Add(time.Minute)
	out.Reset()
	Compare(&out, dirA, ra, dirB, rb)
	assert.Contains(t, out.String(), "**The workloads differ** (jobs 1000 / 1000, planned 1000 / 1000 triggers/s, windows 1m0s / 2m0s)")
}

func TestReadReportRefuses(t *testing.T) {
	t.Parallel()
	_, err := ReadReport(t.TempDir())
	assert.ErrorContains(t, err, "report.json")
	dir := t.TempDir()
	r := sampleReport()
	r.Systems = nil
	require.NoError(t, r.Write(dir))
	_, err = ReadReport(dir)
	assert.ErrorContains(t, err, "no system measured")
}
