package leasing

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTeamSlotsRedis(t *testing.T)     { runTeamSlots(t, realRedis) }
func TestTeamSlotsMiniredis(t *testing.T) { runTeamSlots(t, miniRedis) }

func runTeamSlots(t *testing.T, newBackend backendFactory) {
	t.Parallel()
	tests := []struct {
		name string
		run  func(t *testing.T, b backend)
	}{
		{"LimitAllowsExactlyN", testTeamSlotLimit},
		{"ExpiredSlotComesBackAndRenewalKeepsIt", testTeamSlotExpiry},
		{"BadArguments", testTeamSlotBadArguments},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t, newBackend(t))
		})
	}
}

func testTeamSlotLimit(t *testing.T, b backend) {
	s, _ := setup(t, b, keeperTimes)
	ctx := t.Context()
	inUse := func() int {
		n, err := s.TeamSlotsInUse(ctx, "payments")
		require.NoError(t, err)
		return n
	}
	require.NoError(t, s.AcquireTeamSlot(ctx, "payments", "r1", 2))
	require.NoError(t, s.AcquireTeamSlot(ctx, "payments", "r2", 2))
	require.ErrorIs(t, s.AcquireTeamSlot(ctx, "payments", "r3", 2), ErrTeamFull)
	require.NoError(t, s.AcquireTeamSlot(ctx, "payments", "r1", 2), "a retried acquire finds its slot")
	require.NoError(t, s.AcquireTeamSlot(ctx, "search", "r3", 2), "teams do not share slots")
	require.Equal(t, 2, inUse())

	require.NoError(t, s.ReleaseTeamSlot(ctx, "payments", "r1"))
	require.NoError(t, s.ReleaseTeamSlot(ctx, "payments", "r1"), "releasing twice is harmless")
	require.Equal(t, 1, inUse())
	require.NoError(t, s.AcquireTeamSlot(ctx, "payments", "r3", 2))
	require.Equal(t, 2, inUse())
}

func testTeamSlotExpiry(t *testing.T, b backend) {
	s, _ := setup(t, b) // TTL 300ms
	ctx := t.Context()
	require.NoError(t, s.AcquireTeamSlot(ctx, "payments", "kept", 2))
	require.NoError(t, s.AcquireTeamSlot(ctx, "payments", "leaked", 2))
	require.ErrorIs(t, s.AcquireTeamSlot(ctx, "payments", "new", 2), ErrTeamFull)
	// Renew "kept" until "leaked" has expired and "new" gets its slot.
	deadline := time.Now().Add(time.Minute)
	for {
		n, err := s.RenewTeamSlots(ctx, "payments", []string{"kept"})
		require.NoError(t, err)
		if n == 1 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the leaked slot never expired")
		sleep(ctx, 50*time.Millisecond)
	}
	require.NoError(t, s.AcquireTeamSlot(ctx, "payments", "new", 2))
	require.ErrorIs(t, s.AcquireTeamSlot(ctx, "payments", "leaked", 2), ErrTeamFull)
}

func testTeamSlotBadArguments(t *testing.T, b backend) {
	s, _ := setup(t, b)
	ctx := t.Context()
	require.ErrorContains(t, s.AcquireTeamSlot(ctx, "", "r", 1), "field Team: is empty")
	require.ErrorContains(t, s.AcquireTeamSlot(ctx, "a{b}", "r", 1), "cluster hash tag")
	require.ErrorContains(t, s.AcquireTeamSlot(ctx, "a", "r", 0), "positive limit")
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
