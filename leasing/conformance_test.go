package leasing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The same suite runs against the real Redis of the local stack and against
// miniredis, the embedded mode's Redis.

func TestConformanceRedis(t *testing.T)     { runConformance(t, realRedis) }
func TestConformanceMiniredis(t *testing.T) { runConformance(t, miniRedis) }

func runConformance(t *testing.T, newBackend backendFactory) {
	t.Parallel()
	tests := []struct {
		name string
		run  func(t *testing.T, b backend)
	}{
		{"AcquireCompleteRelease", testAcquireCompleteRelease},
		{"DedupeMarkRefusesReexecution", testDedupeMark},
		{"ConcurrencyLimitAllowsExactlyN", testConcurrencyLimit},
		{"RestartedHolderTakesOverItsRuns", testRestartedHolderTakesOver},
		{"RacingAcquiresOfOneRunOneWins", testRaceSameRun},
		{"FencingTokensStrictlyIncrease", testFencingTokens},
		{"HolderThatStopsRenewingLosesSlot", testExpiredHolderLosesSlot},
		{"KeeperHoldsSlotUntilStopped", testKeeperHoldsSlot},
		{"LeakedSlotsComeBackAfterExpiry", testLeakedSlots},
		{"WrongTokenIsRefused", testWrongToken},
		{"NoScriptIsRecovered", testNoScript},
		{"KeeperCancelsWhenKeysDeleted", testKeeperKeysDeleted},
		{"KeeperCancelsAtTrustedUntilWhenRedisDown", testKeeperRedisDown},
		{"TrustMeasuredFromCallStart", testTrustFromCallStart},
		{"AcquireBatch", testAcquireBatch},
		{"RevokeForReplace", testRevoke},
		{"RetriedAcquireFindsItsSlot", testRetriedAcquire},
		{"AcquireReportsTheFlag", testAcquireFlag},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t, newBackend(t))
		})
	}
}

// waitDone waits for ctx to end, failing the test after within.
func waitDone(t *testing.T, ctx context.Context, within time.Duration) time.Time {
	t.Helper()
	select {
	case <-ctx.Done():
		return time.Now()
	case <-time.After(within):
		t.Fatalf("context not cancelled within %s", within)
		return time.Time{}
	}
}

func testAcquireCompleteRelease(t *testing.T, b backend) {
	// Nothing here waits for an expiry, so the lease outlives any pause of
	// a busy machine between two calls (300 ms did not, beside three CI runs).
	s, c := setup(t, b, func(c *Config) { c.TTL, c.Margin = 10*time.Second, 2*time.Second })
	ctx := t.Context()

	before := time.Now()
	l, err := s.Acquire(ctx, Request{JobID: "job", RunID: "job@1000"})
	require.NoError(t, err)
	assert.Equal(t, "job", l.JobID)
	assert.Equal(t, "job@1000", l.RunID)
	assert.Equal(t, int64(1), l.Token, "first token of a job")
	assert.False(t, l.AcquiredAt.Before(before))
	assert.Equal(t, 10*time.Second, l.TTL)
	assert.Equal(t, l.AcquiredAt.Add(8*time.Second), l.TrustedUntil())

	// Slot keys live as long as their holder; the fence never expires.
	pttl, err := c.PTTL(ctx, s.slotsKey("job")).Result()
	require.NoError(t, err)
	assert.True(t, pttl > 0 && pttl <= 10*time.Second, "slots PTTL %s", pttl)
	pttl, err = c.PTTL(ctx, s.holdersKey("job")).Result()
	require.NoError(t, err)
	assert.True(t, pttl > 0 && pttl <= 10*time.Second, "holders PTTL %s", pttl)
	assert.Equal(t, time.Duration(-1), c.PTTL(ctx, s.fenceKey("job")).Val())

	renewed, err := s.Renew(ctx, l)
	require.NoError(t, err)
	assert.Equal(t, l.Token, renewed.Token)
	assert.False(t, renewed.AcquiredAt.Before(l.AcquiredAt))

	// Release frees the slot without marking the run done.
	require.NoError(t, s.Release(ctx, renewed))
	require.ErrorIs(t, s.Release(ctx, renewed), ErrLeaseLost, "release twice")
	require.ErrorIs(t, s.Complete(ctx, renewed), ErrLeaseLost, "complete after release")
	_, err = s.Renew(ctx, renewed)
	require.ErrorIs(t, err, ErrLeaseLost, "renew after release")

	again, err := s.Acquire(ctx, Request{JobID: "job", RunID: "job@1000"})
	require.NoError(t, err, "a released run can be acquired again")
	assert.Greater(t, again.Token, l.Token)
	assert.Equal(t, int64(0), c.Exists(ctx, s.doneKey("job", "job@1000")).Val())
	require.NoError(t, s.Complete(ctx, again))
}

func testAcquireFlag(t *testing.T, b backend) {
	s, c := setup(t, b, steadyTimes)
	ctx := t.Context()
	flag := b.prefix + "{job}:marker:job@1000"

	other := b.prefix + "{job}:other:job@1000"
	flags := []string{flag, other}

	l, err := s.Acquire(ctx, Request{JobID: "job", RunID: "job@1000", Flags: flags})
	require.NoError(t, err)
	assert.Equal(t, []bool{false, false}, l.Flagged, "no flag key yet")
	require.NoError(t, s.Release(ctx, l))

	require.NoError(t, c.Set(ctx, flag, "x", time.Minute).Err())
	l, err = s.Acquire(ctx, Request{JobID: "job", RunID: "job@1000", Flags: flags})
	require.NoError(t, err)
	assert.Equal(t, []bool{true, false}, l.Flagged, "the first flag key exists")
	require.NoError(t, s.Release(ctx, l))

	require.NoError(t, c.Set(ctx, other, "x", time.Minute).Err())
	l, err = s.Acquire(ctx, Request{JobID: "job", RunID: "job@1000", Flags: []string{other}})
	require.NoError(t, err)
	assert.Equal(t, []bool{true}, l.Flagged, "each flag in the order asked")
	require.NoError(t, s.Release(ctx, l))

	l, err = s.Acquire(ctx, Request{JobID: "job", RunID: "job@1000"})
	require.NoError(t, err)
	assert.Empty(t, l.Flagged, "a request without flags is never flagged")
	require.NoError(t, s.Release(ctx, l))

	// Batched acquires report them too.
	res := s.AcquireBatch(ctx, []Request{
		{JobID: "job", RunID: "job@1000", Flags: flags},
		{JobID: "other", RunID: "other@1", Flags: []string{b.prefix + "{other}:marker:other@1"}},
	})
	require.NoError(t, res[0].Err)
	require.NoError(t, res[1].Err)
	assert.Equal(t, []bool{true, true}, res[0].Lease.Flagged)
	assert.Equal(t, []bool{false}, res[1].Lease.Flagged)

	// A full job reports the flags too, with its holders.
	for _, r := range res {
		require.NoError(t, s.Release(ctx, r.Lease))
	}
	holder, err := s.Acquire(ctx, Request{JobID: "job", RunID: "job@3000"})
	require.NoError(t, err)
	_, err = s.Acquire(ctx, Request{JobID: "job", RunID: "job@1000", Flags: flags})
	var full *NoSlotError
	require.ErrorAs(t, err, &full)
	assert.Equal(t, []string{"job@3000"}, full.Holders)
	assert.Equal(t, []bool{true, true}, full.Flagged)
	_, err = s.Acquire(ctx, Request{JobID: "job", RunID: "job@2000"})
	require.ErrorAs(t, err, &full)
	assert.Equal(t, []string{"job@3000"}, full.Holders)
	assert.Empty(t, full.Flagged, "a request without flags is never flagged")
	require.NoError(t, s.Release(ctx, holder))

	// A flag outside the job's slot is refused, naming the field.
	_, err = s.Acquire(ctx, Request{JobID: "job", RunID: "job@2", Flags: []string{flag, b.prefix + "marker"}})
	require.ErrorContains(t, err, "field Flags[1]")
}

func testDedupeMark(t *testing.T, b backend) {
	s, c := setup(t, b, steadyTimes, func(c *Config) { c.DoneRetention = time.Minute })
	ctx := t.Context()
	req := Request{JobID: "job", RunID: "job@1000"}

	l, err := s.Acquire(ctx, req)
	require.NoError(t, err)
	require.NoError(t, s.Complete(ctx, l))
	require.NoError(t, s.Complete(ctx, l), "completing again (a retry after a lost reply) succeeds")

	_, err = s.Acquire(ctx, req)
	require.ErrorIs(t, err, ErrAlreadyDone)
	assert.False(t, IsRetryable(err))

	pttl, err := c.PTTL(ctx, s.doneKey(req.JobID, req.RunID)).Result()
	require.NoError(t, err)
	assert.True(t, pttl > 0 && pttl <= time.Minute, "done mark PTTL %s", pttl)
	assert.Equal(t, fmt.Sprint(l.Token), c.Get(ctx, s.doneKey(req.JobID, req.RunID)).Val())

	// Completion freed the slot: the next run of the job (limit 1) gets it.
	next, err := s.Acquire(ctx, Request{JobID: "job", RunID: "job@2000"})
	require.NoError(t, err)
	// A stale holder of the done run cannot complete another's lease.
	require.ErrorIs(t, s.Complete(ctx, Lease{JobID: "job", RunID: "job@2000", Token: l.Token}), ErrLeaseLost)
	require.NoError(t, s.Complete(ctx, next))
}

func testConcurrencyLimit(t *testing.T, b backend) {
	s, _ := setup(t, b, func(c *Config) { c.TTL = 10 * time.Second; c.Margin = 0 })
	ctx := t.Context()
	const limit, runners = 3, 10
	leases := make([]Lease, runners)
	errs := make([]error, runners)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range runners {
		wg.Go(func() {
			<-start
			leases[i], errs[i] = s.Acquire(ctx, Request{JobID: "job", RunID: fmt.Sprintf("job@%d", i), Limit: limit})
		})
	}
	close(start)
	wg.Wait()

	var winners, losers []int
	tokens := map[int64]bool{}
	for i, err := range errs {
		if err == nil {
			winners = append(winners, i)
			tokens[leases[i].Token] = true
		} else {
			losers = append(losers, i)
		}
	}
	require.Len(t, winners, limit)
	require.Len(t, tokens, limit, "every winner has its own token")
	var holders []string
	for _, i := range winners {
		holders = append(holders, leases[i].RunID)
	}
	for _, i := range losers {
		var noSlot *NoSlotError
		require.ErrorAs(t, errs[i], &noSlot)
		require.ErrorIs(t, errs[i], ErrNoSlot)
		assert.ElementsMatch(t, holders, noSlot.Holders, "the refusal names the holders")
		assert.Equal(t, limit, noSlot.Limit)
		assert.False(t, IsRetryable(errs[i]))
	}

	// Freeing one slot admits exactly one more run.
	require.NoError(t, s.Release(ctx, leases[winners[0]]))
	_, err := s.Acquire(ctx, Request{JobID: "job", RunID: fmt.Sprintf("job@%d", losers[0]), Limit: limit})
	require.NoError(t, err)
	_, err = s.Acquire(ctx, Request{JobID: "job", RunID: fmt.Sprintf("job@%d", losers[1]), Limit: limit})
	require.ErrorIs(t, err, ErrNoSlot)

	// Another job's slots are its own.
	_, err = s.Acquire(ctx, Request{JobID: "other", RunID: "other@1"})
	require.NoError(t, err)
}

func testRaceSameRun(t *testing.T, b backend) {
	s, _ := setup(t, b, func(c *Config) { c.TTL = 10 * time.Second; c.Margin = 0 })
	ctx := t.Context()
	const runners = 16
	leases := make([]Lease, runners)
	errs := make([]error, runners)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range runners {
		wg.Go(func() {
			<-start
			// A limit as large as the crowd: only the run's own lease keeps
			// the others out.
			leases[i], errs[i] = s.Acquire(ctx, Request{JobID: "job", RunID: "job@1000", Limit: runners})
		})
	}
	close(start)
	wg.Wait()
	won := 0
	for i, err := range errs {
		if err == nil {
			won++
			assert.Equal(t, int64(1), leases[i].Token)
			continue
		}
		require.ErrorIs(t, err, ErrRunHeld)
	}
	require.Equal(t, 1, won)
}

func testFencingTokens(t *testing.T, b backend) {
	s, _ := setup(t, b, steadyTimes)
	ctx := t.Context()
	var last int64
	for i := range 6 {
		l, err := s.Acquire(ctx, Request{JobID: "job", RunID: fmt.Sprintf("job@%d", i/2*2)})
		require.NoError(t, err)
		require.Greater(t, l.Token, last, "holder %d", i)
		last = l.Token
		// Alternate the ways a lease ends: each run is released, then
		// acquired again and completed.
		if i%2 == 0 {
			require.NoError(t, s.Release(ctx, l))
		} else {
			require.NoError(t, s.Complete(ctx, l))
		}
	}
	// Tokens are per job.
	l, err := s.Acquire(ctx, Request{JobID: "other", RunID: "other@1"})
	require.NoError(t, err)
	assert.Equal(t, int64(1), l.Token)
}

func testExpiredHolderLosesSlot(t *testing.T, b backend) {
	// The slot must still be held when job@2 first asks, and job@2's lease
	// when job@1 asks last: a TTL a loaded machine cannot outlast between
	// two calls, which the test then waits out.
	s, c := setup(t, b, keeperTimes)
	ctx := t.Context()
	a, err := s.Acquire(ctx, Request{JobID: "job", RunID: "job@1"})
	require.NoError(t, err)

	_, err = s.Acquire(ctx, Request{JobID: "job", RunID: "job@2"})
	var noSlot *NoSlotError
	require.ErrorAs(t, err, &noSlot)
	require.Equal(t, []string{"job@1"}, noSlot.Holders)

	// a stops renewing; job@2 gets the slot once a's lease expired, not before.
	var bLease Lease
	require.Eventually(t, func() bool {
		bLease, err = s.Acquire(ctx, Request{JobID: "job", RunID: "job@2"})
		return !errors.Is(err, ErrNoSlot)
	}, 10*a.TTL, 10*time.Millisecond)
	require.NoError(t, err)
	// The server's expiry counts from when the acquire reached it, which is
	// after a.AcquiredAt (2ms allows for millisecond rounding).
	assert.GreaterOrEqual(t, time.Since(a.AcquiredAt), a.TTL-2*time.Millisecond)
	assert.Greater(t, bLease.Token, a.Token)

	_, err = s.Renew(ctx, a)
	require.ErrorIs(t, err, ErrLeaseLost)
	require.ErrorIs(t, s.Complete(ctx, a), ErrLeaseLost)
	assert.Equal(t, int64(0), c.Exists(ctx, s.doneKey("job", "job@1")).Val(), "a lost lease writes no dedupe mark")
	require.ErrorIs(t, s.Release(ctx, a), ErrLeaseLost)

	_, err = s.Acquire(ctx, Request{JobID: "job", RunID: "job@1"})
	require.ErrorAs(t, err, &noSlot, "the expired run is not done, only out of a slot")
	require.Equal(t, []string{"job@2"}, noSlot.Holders)
}

func testKeeperHoldsSlot(t *testing.T, b backend) {
	s, _ := setup(t, b, keeperTimes)
	ctx := t.Context()
	a, err := s.Acquire(ctx, Request{JobID: "job", RunID: "job@1"})
	require.NoError(t, err)
	k := NewKeeper(s, a, nil)
	require.NoError(t, k.Start(ctx))
	defer k.Stop()

	// For three TTLs the renewed lease keeps the slot.
	require.Never(t, func() bool {
		_, err := s.Acquire(ctx, Request{JobID: "job", RunID: "job@2"})
		return err == nil
	}, 3*a.TTL, 20*time.Millisecond)
	require.NoError(t, k.Context().Err())
	renewed := k.Lease()
	assert.Equal(t, a.Token, renewed.Token)
	assert.True(t, renewed.AcquiredAt.After(a.AcquiredAt), "the Keeper renewed")

	k.Stop()
	require.ErrorIs(t, context.Cause(k.Context()), ErrKeeperStopped)
	require.Eventually(t, func() bool {
		_, err := s.Acquire(ctx, Request{JobID: "job", RunID: "job@2"})
		return err == nil
	}, 5*time.Second, 10*time.Millisecond)
}

func testLeakedSlots(t *testing.T, b backend) {
	s, c := setup(t, b, keeperTimes)
	ctx := t.Context()
	req := func(run string) Request { return Request{JobID: "job", RunID: run, Limit: 3} }

	// One live holder keeps the job's keys alive, so the dead holders' slots
	// can only come back through acquire's reclaim, not by the keys expiring.
	live, err := s.Acquire(ctx, req("job@1"))
	require.NoError(t, err)
	k := NewKeeper(s, live, nil)
	require.NoError(t, k.Start(ctx))
	defer k.Stop()
	// Two holders that die right after acquiring: nothing renews or frees.
	dead := make([]Lease, 2)
	for i, run := range []string{"job@2", "job@3"} {
		dead[i], err = s.Acquire(ctx, req(run))
		require.NoError(t, err)
	}
	_, err = s.Acquire(ctx, req("job@4"))
	require.ErrorIs(t, err, ErrNoSlot)

	// Wait until the server's clock has passed both dead holders' expiry.
	var stop error // ends the wait early; the condition runs on another goroutine
	require.Eventually(t, func() bool {
		if stop = k.Context().Err(); stop != nil {
			return true // the live holder lost its lease
		}
		now := c.Time(ctx).Val().UnixMilli()
		for _, run := range []string{"job@2", "job@3"} {
			expiry, err := c.ZScore(ctx, s.slotsKey("job"), run).Result()
			if err != nil {
				stop = fmt.Errorf("slot of %s: %w", run, err)
				return true
			}
			if float64(now) <= expiry {
				return false
			}
		}
		return true
	}, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, stop)
	require.Len(t, c.ZRange(ctx, s.slotsKey("job"), 0, -1).Val(), 3, "nobody has reclaimed the slots yet")

	// An expired lease is lost even before anyone took its slot.
	_, err = s.Renew(ctx, dead[0])
	require.ErrorIs(t, err, ErrLeaseLost)

	// Both dead holders' slots come back; the live one keeps its own.
	_, err = s.Acquire(ctx, req("job@4"))
	require.NoError(t, err)
	_, err = s.Acquire(ctx, req("job@5"))
	require.NoError(t, err)
	var noSlot *NoSlotError
	_, err = s.Acquire(ctx, req("job@6"))
	require.ErrorAs(t, err, &noSlot)
	assert.ElementsMatch(t, []string{"job@1", "job@4", "job@5"}, noSlot.Holders)
	assert.ElementsMatch(t, []string{"job@1", "job@4", "job@5"}, c.HKeys(ctx, s.holdersKey("job")).Val(), "dead holders' entries are gone")
	require.ErrorIs(t, s.Complete(ctx, dead[1]), ErrLeaseLost)
	require.NoError(t, k.Context().Err(), "the live holder never lost its lease")

	// With nobody renewing or acquiring, the keys of an abandoned job expire
	// on their own.
	k.Stop()
	require.Eventually(t, func() bool {
		return c.Exists(ctx, s.slotsKey("job"), s.holdersKey("job")).Val() == 0
	}, 5*time.Second, 10*time.Millisecond)
}

func testWrongToken(t *testing.T, b backend) {
	s, c := setup(t, b, steadyTimes)
	ctx := t.Context()
	l, err := s.Acquire(ctx, Request{JobID: "job", RunID: "job@1"})
	require.NoError(t, err)
	wrong := l
	wrong.Token++

	_, err = s.Renew(ctx, wrong)
	require.ErrorIs(t, err, ErrLeaseLost)
	require.ErrorIs(t, s.Complete(ctx, wrong), ErrLeaseLost)
	require.ErrorIs(t, s.Release(ctx, wrong), ErrLeaseLost)
	other := l
	other.RunID = "job@2"
	_, err = s.Renew(ctx, other)
	require.ErrorIs(t, err, ErrLeaseLost, "a token is bound to its run")

	// None of that touched the real holder.
	assert.Equal(t, int64(0), c.Exists(ctx, s.doneKey("job", "job@1")).Val())
	_, err = s.Renew(ctx, l)
	require.NoError(t, err)
	require.NoError(t, s.Complete(ctx, l))

	_, err = s.Renew(ctx, Lease{JobID: "job", RunID: "job@1"})
	require.ErrorContains(t, err, "Token")
}

func testNoScript(t *testing.T, b backend) {
	s, c := setup(t, b, steadyTimes)
	ctx := t.Context()

	// flush empties Redis's script cache; loaded checks that sc is back in it.
	flush := func() { require.NoError(t, c.ScriptFlush(ctx).Err()) }
	loaded := func(sc *script) {
		exists, err := c.ScriptExists(ctx, sc.sha).Result()
		require.NoError(t, err)
		require.Equal(t, []bool{true}, exists, "script %s loaded again", sc.name)
	}

	flush()
	l, err := s.Acquire(ctx, Request{JobID: "job", RunID: "job@1"})
	require.NoError(t, err)
	loaded(s.scripts.acquire)
	flush()
	l, err = s.Renew(ctx, l)
	require.NoError(t, err)
	loaded(s.scripts.renew)
	flush()
	require.NoError(t, s.Release(ctx, l))
	loaded(s.scripts.release)

	flush()
	res := s.AcquireBatch(ctx, []Request{{JobID: "job", RunID: "job@2"}, {JobID: "job2", RunID: "job2@2"}})
	for _, r := range res {
		require.NoError(t, r.Err)
	}
	loaded(s.scripts.acquire)
	flush()
	for _, err := range s.CompleteBatch(ctx, []Lease{res[0].Lease, res[1].Lease}) {
		require.NoError(t, err)
	}
	loaded(s.scripts.complete)
	_, err = s.Acquire(ctx, Request{JobID: "job", RunID: "job@2"})
	require.ErrorIs(t, err, ErrAlreadyDone, "the batch completion took effect")
}

func testKeeperKeysDeleted(t *testing.T, b backend) {
	s, c := setup(t, b, keeperTimes)
	ctx := t.Context()
	l, err := s.Acquire(ctx, Request{JobID: "job", RunID: "job@1"})
	require.NoError(t, err)
	k := NewKeeper(s, l, nil)
	require.NoError(t, k.Start(ctx))
	defer k.Stop()

	require.NoError(t, c.Del(ctx, s.slotsKey("job"), s.holdersKey("job")).Err())
	waitDone(t, k.Context(), 5*time.Second)
	cause := context.Cause(k.Context())
	require.ErrorIs(t, cause, ErrLeaseLost)
	require.NotErrorIs(t, cause, ErrLeaseUntrusted, "cancelled by the refused renewal, not by the trust timer")
}

func testKeeperRedisDown(t *testing.T, b backend) {
	for _, renewedFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("renewed first %v", renewedFirst), func(t *testing.T) {
			var out outage
			// A longer lease than elsewhere, so that a busy machine's timer
			// delays stay well inside the margin.
			s, _ := setupHooked(t, b, []redis.Hook{&out}, func(c *Config) { c.TTL, c.Margin = 2*time.Second, 500*time.Millisecond })
			ctx := t.Context()
			job := fmt.Sprintf("job-%v", renewedFirst) // the subtests share the backend
			l, err := s.Acquire(ctx, Request{JobID: job, RunID: job + "@1"})
			require.NoError(t, err)
			k := NewKeeper(s, l, nil)
			require.NoError(t, k.Start(ctx))
			defer k.Stop()

			if renewedFirst {
				require.Eventually(t, func() bool { return k.Lease().AcquiredAt.After(l.AcquiredAt) }, 5*time.Second, 5*time.Millisecond)
			}
			// Cut Redis off: every renewal fails with a connection error.
			out.down.Store(true)
			last := k.Lease()
			at := waitDone(t, k.Context(), 5*time.Second)
			require.ErrorIs(t, context.Cause(k.Context()), ErrLeaseUntrusted)
			require.ErrorIs(t, context.Cause(k.Context()), ErrLeaseLost)
			final := k.Lease()
			assert.Equal(t, last.AcquiredAt, final.AcquiredAt, "no renewal succeeded while Redis was down")
			assert.False(t, at.Before(final.TrustedUntil()), "cancelled at %s, before the lease's trusted-until %s", at, final.TrustedUntil())
			assert.Less(t, at.Sub(final.TrustedUntil()), final.Margin, "cancelled within the margin after trusted-until, before the server could expire the lease")
		})
	}
}

func testTrustFromCallStart(t *testing.T, b backend) {
	clock := &slowClock{step: time.Hour}
	clock.now.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	s, _ := setupHooked(t, b, []redis.Hook{clock}, steadyTimes, func(c *Config) { c.Now = clock.Now })
	ctx := t.Context()

	before := clock.Now()
	l, err := s.Acquire(ctx, Request{JobID: "job", RunID: "job@1"})
	require.NoError(t, err)
	require.Equal(t, before, l.AcquiredAt, "trust counts from when the acquire started")
	require.True(t, clock.Now().After(l.TrustedUntil()), "the reply came back after an hour: the lease is already untrusted")

	before = clock.Now()
	l, err = s.Renew(ctx, l)
	require.NoError(t, err)
	require.Equal(t, before, l.AcquiredAt, "trust counts from when the renewal started")

	before = clock.Now()
	res := s.AcquireBatch(ctx, []Request{{JobID: "job2", RunID: "job2@1"}})
	require.NoError(t, res[0].Err)
	require.Equal(t, before, res[0].Lease.AcquiredAt)

	// A Keeper refuses to start on a lease that is no longer trusted.
	k := NewKeeper(s, l, nil)
	require.ErrorIs(t, k.Start(ctx), ErrLeaseLost)
	require.Error(t, k.Context().Err())
	k.Stop()
}

func testAcquireBatch(t *testing.T, b backend) {
	s, _ := setup(t, b, func(c *Config) { c.TTL = 10 * time.Second; c.Margin = 0 })
	ctx := t.Context()
	done, err := s.Acquire(ctx, Request{JobID: "d", RunID: "d@1"})
	require.NoError(t, err)
	require.NoError(t, s.Complete(ctx, done))

	reqs := []Request{
		{JobID: "a", RunID: "a@1"},
		{JobID: "a", RunID: "a@1"}, // the same run again in the batch
		{JobID: "b", RunID: "b@1", Limit: 1},
		{JobID: "b", RunID: "b@2", Limit: 1},
		{JobID: "d", RunID: "d@1"},
		{JobID: "", RunID: "x@1"},
		{JobID: "c{x}", RunID: "c@1"},
		{JobID: "c", RunID: "c@1", Limit: -1},
		{JobID: "c", RunID: "c@2", Limit: 2},
	}
	res := s.AcquireBatch(ctx, reqs)
	require.Len(t, res, len(reqs))
	require.NoError(t, res[0].Err)
	require.ErrorIs(t, res[1].Err, ErrRunHeld)
	require.NoError(t, res[2].Err)
	var noSlot *NoSlotError
	require.ErrorAs(t, res[3].Err, &noSlot)
	assert.Equal(t, []string{"b@1"}, noSlot.Holders)
	require.ErrorIs(t, res[4].Err, ErrAlreadyDone)
	require.ErrorContains(t, res[5].Err, "JobID")
	require.ErrorContains(t, res[6].Err, "JobID")
	require.ErrorContains(t, res[7].Err, "Limit")
	require.NoError(t, res[8].Err)
	for i, r := range res {
		if r.Err == nil {
			assert.Equal(t, reqs[i].RunID, r.Lease.RunID, "result %d belongs to request %d", i, i)
		}
	}

	stale := res[0].Lease
	stale.Token++
	errs := s.CompleteBatch(ctx, []Lease{res[0].Lease, stale, res[2].Lease, {}, res[8].Lease})
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], ErrLeaseLost)
	require.NoError(t, errs[2])
	require.ErrorContains(t, errs[3], "JobID")
	require.NoError(t, errs[4])

	res = s.AcquireBatch(ctx, []Request{{JobID: "a", RunID: "a@1"}, {JobID: "b", RunID: "b@2", Limit: 1}})
	require.ErrorIs(t, res[0].Err, ErrAlreadyDone)
	require.NoError(t, res[1].Err, "completion freed b's slot")
}

func testRevoke(t *testing.T, b backend) {
	s, _ := setup(t, b, keeperTimes)
	ctx := t.Context()
	a, err := s.Acquire(ctx, Request{JobID: "job", RunID: "job@1"})
	require.NoError(t, err)
	k := NewKeeper(s, a, nil)
	require.NoError(t, k.Start(ctx))
	defer k.Stop()

	// Overlap policy replace: the newcomer finds the slot taken and revokes.
	_, err = s.Acquire(ctx, Request{JobID: "job", RunID: "job@2"})
	var noSlot *NoSlotError
	require.ErrorAs(t, err, &noSlot)
	ok, err := s.Revoke(ctx, "job", noSlot.Holders[0])
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = s.Revoke(ctx, "job", noSlot.Holders[0])
	require.NoError(t, err)
	require.False(t, ok, "nothing left to revoke")

	waitDone(t, k.Context(), 5*time.Second)
	require.ErrorIs(t, context.Cause(k.Context()), ErrLeaseLost)
	require.NotErrorIs(t, context.Cause(k.Context()), ErrLeaseUntrusted)
	require.ErrorIs(t, s.Complete(ctx, a), ErrLeaseLost)

	// The slot stays taken until the revoked lease would have expired.
	require.Eventually(t, func() bool {
		_, err := s.Acquire(ctx, Request{JobID: "job", RunID: "job@2"})
		return err == nil
	}, 5*time.Second, 10*time.Millisecond)
	assert.GreaterOrEqual(t, time.Since(k.Lease().AcquiredAt), a.TTL-2*time.Millisecond)
}

func testRetriedAcquire(t *testing.T, b backend) {
	s, _ := setup(t, b, steadyTimes)
	ctx := t.Context()
	// The same call twice, as go-redis sends it again when the connection
	// broke after the script ran.
	c := s.acquireCall(Request{JobID: "job", RunID: "job@1", Limit: 5})
	first, err := s.eval(ctx, s.scripts.acquire, *c)
	require.NoError(t, err)
	second, err := s.eval(ctx, s.scripts.acquire, *c)
	require.NoError(t, err)
	require.Equal(t, first, second, "the retry gets the lease it took")

	_, err = s.Acquire(ctx, Request{JobID: "job", RunID: "job@1", Limit: 5})
	require.ErrorIs(t, err, ErrRunHeld, "another acquire of the run does not")
}

func holder(name string, incarnation int64) func(*Config) {
	return func(c *Config) { c.Holder, c.Incarnation = name, incarnation }
}

// A holder that restarted (the same Holder, a later Incarnation) takes over
// the runs its earlier self leased at once; nobody else does before the TTL.
func testRestartedHolderTakesOver(t *testing.T, b backend) {
	ctx := t.Context()
	req := Request{JobID: "job", RunID: "job@1000"}
	first, _ := setup(t, b, steadyTimes, holder("runner-a", 1000))
	l1, err := first.Acquire(ctx, req)
	require.NoError(t, err)

	for name, opts := range map[string][]func(*Config){
		"another holder":                   {steadyTimes, holder("runner-b", 2000)},
		"an earlier incarnation":           {steadyTimes, holder("runner-a", 999)},
		"the same incarnation":             {steadyTimes, holder("runner-a", 1000)},
		"a store without a holder":         {steadyTimes},
		"a holder whose name only ends so": {steadyTimes, holder("x-runner-a", 2000)},
	} {
		other, _ := setup(t, b, opts...)
		_, err := other.Acquire(ctx, req)
		require.ErrorIs(t, err, ErrRunHeld, name)
	}

	restarted, _ := setup(t, b, steadyTimes, holder("runner-a", 2000))
	l2, err := restarted.Acquire(ctx, req)
	require.NoError(t, err, "the restarted holder takes the run over")
	require.Greater(t, l2.Token, l1.Token)

	// The earlier incarnation's lease is gone.
	_, err = first.Renew(ctx, l1)
	require.ErrorIs(t, err, ErrLeaseLost)
	require.ErrorIs(t, first.Complete(ctx, l1), ErrLeaseLost)
	// The restart's own lease stands, and nobody else takes it.
	_, err = first.Acquire(ctx, req)
	require.ErrorIs(t, err, ErrRunHeld, "the earlier incarnation cannot take it back")
	_, err = restarted.Renew(ctx, l2)
	require.NoError(t, err)
	require.NoError(t, restarted.Complete(ctx, l2))
}
