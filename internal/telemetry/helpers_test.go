package telemetry_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
)

// series returns the metrics of the family name whose labels include want.
func series(t *testing.T, g prometheus.Gatherer, name string, want map[string]string) []*dto.Metric {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	var out []*dto.Metric
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue metric
				}
			}
			out = append(out, m)
		}
	}
	return out
}

// histogramCount is the sample count of the one series of name matching want.
func histogramCount(t *testing.T, g prometheus.Gatherer, name string, want map[string]string) uint64 {
	t.Helper()
	s := series(t, g, name, want)
	require.Len(t, s, 1, "series of %s with %v", name, want)
	return s[0].GetHistogram().GetSampleCount()
}
