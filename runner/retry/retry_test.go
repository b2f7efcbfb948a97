package retry

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

func TestFromProtoDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   *sundialv1.RetryPolicy
		want Policy
	}{
		{"nil", nil, Policy{MaxAttempts: 3, InitialBackoff: time.Second, MaxBackoff: 5 * time.Minute, Multiplier: 2}},
		{"zero values", &sundialv1.RetryPolicy{}, Policy{MaxAttempts: 3, InitialBackoff: time.Second, MaxBackoff: 5 * time.Minute, Multiplier: 2}},
		{"set", &sundialv1.RetryPolicy{
			MaxAttempts: 7, InitialBackoff: durationpb.New(100 * time.Millisecond),
			MaxBackoff: durationpb.New(time.Second), Multiplier: 3, NonRetryableErrors: []string{"http_503"},
		}, Policy{MaxAttempts: 7, InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second, Multiplier: 3, NonRetryable: []string{"http_503"}}},
		{"max below initial is raised to it", &sundialv1.RetryPolicy{
			InitialBackoff: durationpb.New(time.Minute), MaxBackoff: durationpb.New(time.Second),
		}, Policy{MaxAttempts: 3, InitialBackoff: time.Minute, MaxBackoff: time.Minute, Multiplier: 2}},
		{"multiplier below 1 is raised to 1", &sundialv1.RetryPolicy{Multiplier: 0.5},
			Policy{MaxAttempts: 3, InitialBackoff: time.Second, MaxBackoff: 5 * time.Minute, Multiplier: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, FromProto(tt.in))
		})
	}
}

func TestCapGrowsThenSaturates(t *testing.T) {
	t.Parallel()
	p := Policy{MaxAttempts: 100, InitialBackoff: time.Second, MaxBackoff: 10 * time.Second, Multiplier: 2}
	tests := []struct {
		failed int
		want   time.Duration
	}{
		{0, time.Second}, {1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second},
		{4, 8 * time.Second}, {5, 10 * time.Second}, {60, 10 * time.Second}, {5000, 10 * time.Second},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, p.Cap(tt.failed), "failed=%d", tt.failed)
	}
}

func TestBackoffFullJitter(t *testing.T) {
	t.Parallel()
	p := Policy{MaxAttempts: 10, InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Minute, Multiplier: 2}
	assert.Equal(t, time.Duration(0), p.Backoff(3, 0))
	assert.Equal(t, 200*time.Millisecond, p.Backoff(3, 0.5))
	assert.Less(t, p.Backoff(3, 1), 400*time.Millisecond, "u=1 is clamped below 1")
	assert.Equal(t, time.Duration(0), p.Backoff(3, -1))

	// Drawn from a seeded source: uniform over [0, cap), so the mean is near
	// cap/2 and both halves are hit.
	r := rand.New(rand.NewPCG(1, 2))
	const n = 20000
	var sum time.Duration
	low, high := 0, 0
	for range n {
		d := p.Backoff(4, r.Float64())
		require.GreaterOrEqual(t, d, time.Duration(0))
		require.Less(t, d, 800*time.Millisecond)
		sum += d
		if d < 400*time.Millisecond {
			low++
		} else {
			high++
		}
	}
	mean := sum / n
	assert.InDelta(t, float64(400*time.Millisecond), float64(mean), float64(20*time.Millisecond))
	assert.InDelta(t, n/2, low, n/20)
	assert.InDelta(t, n/2, high, n/20)
}

func TestDecide(t *testing.T) {
	t.Parallel()
	p := Policy{MaxAttempts: 3, InitialBackoff: time.Second, MaxBackoff: 4 * time.Second, Multiplier: 2, NonRetryable: []string{"http_503"}}
	tests := []struct {
		name    string
		attempt int
		f       Failure
		u       float64
		want    Decision
	}{
		{"retryable, first attempt", 1, Failure{Code: "http_500", Retryable: true}, 0.5, Decision{Retry: true, Delay: 500 * time.Millisecond}},
		{"retryable, second attempt", 2, Failure{Code: "timeout", Retryable: true}, 0.5, Decision{Retry: true, Delay: time.Second}},
		{"last attempt", 3, Failure{Code: "http_500", Retryable: true}, 0.5, Decision{Reason: "attempts_exhausted"}},
		{"not retryable", 1, Failure{Code: "http_404"}, 0.5, Decision{Reason: "non_retryable"}},
		{"code listed as non-retryable", 1, Failure{Code: "http_503", Retryable: true}, 0.5, Decision{Reason: "non_retryable_code"}},
		{"retry-after is a minimum", 1, Failure{Code: "http_429", Retryable: true, RetryAfter: 30 * time.Second}, 0.5, Decision{Retry: true, Delay: 30 * time.Second}},
		{"retry-after below the backoff changes nothing", 2, Failure{Code: "http_429", Retryable: true, RetryAfter: time.Millisecond}, 0.5, Decision{Retry: true, Delay: time.Second}},
		{"retry-after is bounded", 1, Failure{Code: "http_503x", Retryable: true, RetryAfter: 1000 * time.Hour}, 0, Decision{Retry: true, Delay: MaxRetryAfter}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, p.Decide(tt.attempt, tt.f, tt.u))
		})
	}
}
