package backoff_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sundialhq/sundial/internal/backoff"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNextStaysUnderTheDoublingCap(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		min, max   time.Duration
		wantCaps   []time.Duration
		afterReset time.Duration
	}{
		{"doubles then caps", 10 * time.Millisecond, 50 * time.Millisecond,
			[]time.Duration{10, 20, 40, 50, 50}, 10},
		{"max below min is min", 30 * time.Millisecond, time.Millisecond,
			[]time.Duration{30, 30, 30}, 30},
		{"zero min is 1ms", 0, 4 * time.Millisecond,
			[]time.Duration{1, 2, 4, 4}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := backoff.New(tt.min, tt.max)
			for i, c := range tt.wantCaps {
				capD := c * time.Millisecond
				require.Equal(t, capD, b.Peek(), "cap of wait %d", i+1)
				for range 50 {
					// Draw many times from the same cap: each must be in (0, cap].
					probe := backoff.New(capD, capD)
					d := probe.Next()
					require.Greater(t, d, time.Duration(0))
					require.LessOrEqual(t, d, capD)
				}
				d := b.Next()
				require.Greater(t, d, time.Duration(0))
				require.LessOrEqual(t, d, capD)
			}
			b.Reset()
			require.Equal(t, tt.afterReset*time.Millisecond, b.Peek())
		})
	}
}

func TestSleepEndsWithContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.False(t, backoff.Sleep(ctx, time.Hour))
	require.False(t, backoff.Sleep(ctx, 0))
	require.True(t, backoff.Sleep(t.Context(), 0))
	require.True(t, backoff.Sleep(t.Context(), time.Millisecond))
}

func TestRetry(t *testing.T) {
	t.Parallel()
	transient := errors.New("transient")
	invalid := errors.New("invalid")

	t.Run("UntilSuccess", func(t *testing.T) {
		t.Parallel()
		calls, retried := 0, 0
		err := backoff.Retry(t.Context(), backoff.Config{Min: time.Millisecond, Max: 2 * time.Millisecond,
			OnRetry: func(err error) { require.ErrorIs(t, err, transient); retried++ }},
			func() error {
				calls++
				if calls < 4 {
					return transient
				}
				return nil
			})
		require.NoError(t, err)
		require.Equal(t, 4, calls)
		require.Equal(t, 3, retried)
	})

	t.Run("PermanentAtOnce", func(t *testing.T) {
		t.Parallel()
		calls := 0
		err := backoff.Retry(t.Context(), backoff.Config{Min: time.Millisecond, Max: time.Millisecond,
			Permanent: func(err error) bool { return errors.Is(err, invalid) }},
			func() error { calls++; return invalid })
		require.ErrorIs(t, err, backoff.ErrPermanent)
		require.ErrorIs(t, err, invalid)
		require.Equal(t, 1, calls)
	})

	t.Run("ContextEnds", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		calls := 0
		err := backoff.Retry(ctx, backoff.Config{Min: time.Hour, Max: time.Hour,
			OnRetry: func(error) { cancel() }},
			func() error { calls++; return transient })
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, err, transient)
		require.Equal(t, 1, calls)
	})
}
