package deps_test

import (
	"log/slog"
	"testing"
	"time"

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

}
