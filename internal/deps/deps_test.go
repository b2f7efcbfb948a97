package deps_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/internal/deps"
)

func TestDefaults(t *testing.T) {
	t.Parallel()
	require.False(t, deps.Logger(nil).Enabled(t.Context(), slog.LevelError), "a nil logger discards")
	l := slog.New(slog.NewTextHandler(t.Output(), nil))
	require.Same(t, l, deps.Logger(l))

	fixed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	require.Equal(t, fixed, deps.Clock(func() time.Time { return fixed })())
	require.WithinDuration(t, time.Now(), deps.Clock(nil)(), time.Minute)

	a, b := deps.Registerer(nil), deps.Registerer(nil)
	require.NotSame(t, prometheus.DefaultRegisterer, a)
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "c"})
	require.NoError(t, a.Register(c))
	require.NoError(t, b.Register(c), "each nil registerer is a registry of its own")
	reg := prometheus.NewRegistry()
	require.Same(t, reg, deps.Registerer(reg))
}
