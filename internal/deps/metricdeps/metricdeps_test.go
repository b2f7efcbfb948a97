package metricdeps_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/internal/deps/metricdeps"
)

func TestRegisterer(t *testing.T) {
	t.Parallel()
	a, b := metricdeps.Registerer(nil), metricdeps.Registerer(nil)
	require.NotSame(t, prometheus.DefaultRegisterer, a)
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "c"})
	require.NoError(t, a.Register(c))
	require.NoError(t, b.Register(c), "each nil registerer is a registry of its own")
	reg := prometheus.NewRegistry()
	require.Same(t, reg, metricdeps.Registerer(reg))
}
