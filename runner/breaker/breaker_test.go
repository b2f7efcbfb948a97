package breaker

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sony/gobreaker/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/runner/target"
)

var (
	errDown  = &target.Error{Code: "http_503", Retryable: true}
	errFinal = &target.Error{Code: "http_404"}
	errCut   = &target.Error{Code: target.CodeCancelled, Retryable: true}
)

func TestOpensAtThreshold(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	s, err := New(Config{Failures: 3, OpenTimeout: time.Hour, Registerer: reg})
	require.NoError(t, err)
	calls := 0
	fail := func() error { calls++; return errDown }
	for i := range 2 {
		require.ErrorIs(t, s.Do(Key{Team: "t", Downstream: "http:a"}, fail), errDown, "failure %d passes through", i+1)
		assert.False(t, s.Open(Key{Team: "t", Downstream: "http:a"}))
	}
	require.ErrorIs(t, s.Do(Key{Team: "t", Downstream: "http:a"}, fail), errDown)
	assert.True(t, s.Open(Key{Team: "t", Downstream: "http:a"}), "open after the third consecutive failure")
	assert.Equal(t, 3, calls)

	err = s.Do(Key{Team: "t", Downstream: "http:a"}, fail)
	var oe *OpenError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, "http:a", oe.Downstream)
	assert.Equal(t, time.Hour, oe.RetryIn)
	assert.Equal(t, 3, calls, "an open breaker does not call")
	assert.InDelta(t, 2, testutil.ToFloat64(s.state.WithLabelValues("t", "http:a")), 0)

	// Other downstreams are unaffected.
	require.NoError(t, s.Do(Key{Team: "t", Downstream: "http:b"}, func() error { return nil }))
	assert.False(t, s.Open(Key{Team: "t", Downstream: "http:b"}))
	// So is another team's breaker to the same downstream.
	assert.False(t, s.Open(Key{Team: "u", Downstream: "http:a"}), "another team's breaker is its own")
	require.NoError(t, s.Do(Key{Team: "u", Downstream: "http:a"}, func() error { return nil }))
}

func TestFinalAnswersAndCancellationsDoNotOpen(t *testing.T) {
	t.Parallel()
	s, err := New(Config{Failures: 2, OpenTimeout: time.Hour})
	require.NoError(t, err)
	for range 10 {
		_ = s.Do(Key{Team: "t", Downstream: "h"}, func() error { return errFinal })
		_ = s.Do(Key{Team: "t", Downstream: "h"}, func() error { return errCut })
	}
	assert.False(t, s.Open(Key{Team: "t", Downstream: "h"}))
	// A success between failures resets the consecutive count.
	for range 5 {
		_ = s.Do(Key{Team: "t", Downstream: "h"}, func() error { return errDown })
		_ = s.Do(Key{Team: "t", Downstream: "h"}, func() error { return nil })
	}
	assert.False(t, s.Open(Key{Team: "t", Downstream: "h"}))
	// A cancellation between failures neither resets nor counts.
	_ = s.Do(Key{Team: "t", Downstream: "h"}, func() error { return errDown })
	_ = s.Do(Key{Team: "t", Downstream: "h"}, func() error { return errCut })
	_ = s.Do(Key{Team: "t", Downstream: "h"}, func() error { return errDown })
	assert.True(t, s.Open(Key{Team: "t", Downstream: "h"}))
}

func TestHalfOpenProbeCloses(t *testing.T) {
	t.Parallel()
	s, err := New(Config{Failures: 1, OpenTimeout: 20 * time.Millisecond})
	require.NoError(t, err)
	_ = s.Do(Key{Team: "t", Downstream: "h"}, func() error { return errDown })
	require.True(t, s.Open(Key{Team: "t", Downstream: "h"}))
	require.Eventually(t, func() bool { return s.State(Key{Team: "t", Downstream: "h"}) == gobreaker.StateHalfOpen }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, s.Do(Key{Team: "t", Downstream: "h"}, func() error { return nil }))
	assert.Equal(t, gobreaker.StateClosed, s.State(Key{Team: "t", Downstream: "h"}))
}

func TestBoundedDownstreams(t *testing.T) {
	t.Parallel()
	s, err := New(Config{Failures: 1, MaxDownstreams: 2})
	require.NoError(t, err)
	for _, d := range []string{"a", "b", "c"} {
		_ = s.Do(Key{Team: "t", Downstream: d}, func() error { return errDown })
	}
	assert.True(t, s.Open(Key{Team: "t", Downstream: "a"}))
	assert.True(t, s.Open(Key{Team: "t", Downstream: "b"}))
	assert.False(t, s.Open(Key{Team: "t", Downstream: "c"}), "beyond the bound there is no breaker")
	calls := 0
	_ = s.Do(Key{Team: "t", Downstream: "c"}, func() error { calls++; return nil })
	assert.Equal(t, 1, calls)
	assert.Equal(t, 2, testutil.CollectAndCount(s.state))
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	err := Config{OpenTimeout: -1, Interval: -1, MaxDownstreams: -1}.Validate()
	require.Error(t, err)
	for _, field := range []string{"OpenTimeout", "Interval", "MaxDownstreams"} {
		assert.Contains(t, err.Error(), field)
	}
	assert.NoError(t, Config{}.Validate())
	_, err = New(Config{OpenTimeout: -1})
	assert.Error(t, err)
}
