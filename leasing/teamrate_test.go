package leasing

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/stretchr/testify/require"
)

// A team starts at most its limit of distinct runs in one window, checked
// and counted atomically: of 20 runners racing for 5 places, exactly 5
// win. A run counted already passes again; another team is not held back.
func TestTeamRateRedis(t *testing.T)     { testTeamRate(t, realRedis(t)) }
func TestTeamRateMiniredis(t *testing.T) { testTeamRate(t, miniRedis(t)) }

func testTeamRate(t *testing.T, b backend) {
	t.Parallel()
	s, _ := setup(t, b, keeperTimes)
	ctx := t.Context()
	var (
		mu  sync.Mutex
		won []string
		wg  sync.WaitGroup
	)
	for i := range 20 {
		id := "r" + string(rune('a'+i))
		wg.Go(func() {
			err := s.StartTeamRun(ctx, "fanout", id, 5)
			var rate *TeamRateError
			switch {
			case err == nil:
				mu.Lock()
				won = append(won, id)
				mu.Unlock()
			case errors.As(err, &rate):
				require.ErrorIs(t, err, ErrTeamRate)
				require.Greater(t, rate.RetryIn, time.Duration(0))
				require.LessOrEqual(t, rate.RetryIn, TeamRateWindow)
			default:
				t.Errorf("run %s: %v", id, err)
			}
		})
	}
	wg.Wait()
	require.Len(t, won, 5, "runs started in one window with a limit of 5")
	if rate := new(TeamRateError); errors.As(s.StartTeamRun(ctx, "fanout", "late", 5), &rate) {
		require.Equal(t, 5, rate.Limit)
	}
	require.NoError(t, s.StartTeamRun(ctx, "fanout", won[0], 5), "a run counted already passes again")
	require.NoError(t, s.StartTeamRun(ctx, "other", "r1", 5), "teams do not share the count")
	require.Error(t, s.StartTeamRun(ctx, "fanout", "r1", 0))
	require.Error(t, s.StartTeamRun(ctx, "", "r1", 5))
}

// The next window starts from zero.
func TestTeamRateNextWindowStartsAfresh(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	mr.ClockTTL(true)
	start := time.Date(2026, 5, 1, 12, 0, 10, 0, time.UTC)
	mr.SetTime(start)
	s, _ := setup(t, backend{addr: mr.Addr(), prefix: "t:"}, keeperTimes)
	ctx := t.Context()
	require.NoError(t, s.StartTeamRun(ctx, "fanout", "a", 2))
	require.NoError(t, s.StartTeamRun(ctx, "fanout", "b", 2))
	err := s.StartTeamRun(ctx, "fanout", "c", 2)
	var rate *TeamRateError
	require.ErrorAs(t, err, &rate)
	require.Equal(t, 50*time.Second, rate.RetryIn, "until the next minute")

	mr.SetTime(start.Add(50 * time.Second))
	require.NoError(t, s.StartTeamRun(ctx, "fanout", "c", 2))
	require.NoError(t, s.StartTeamRun(ctx, "fanout", "d", 2))
	require.ErrorIs(t, s.StartTeamRun(ctx, "fanout", "e", 2), ErrTeamRate)
}
