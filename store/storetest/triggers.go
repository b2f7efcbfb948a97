package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/store"
)

func testTriggerDedupe(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	const ttl = time.Hour
	first := base.Add(1500 * time.Microsecond) // stored at millisecond precision
	got, err := s.TriggerDedupe(ctx, "billing", "ticket-1", first, ttl)
	require.NoError(t, err)
	assert.True(t, got.Equal(base.Add(time.Millisecond)), "the first call records its due time: %v", got)

	// The same key again, with another due time: the first one wins.
	got, err = s.TriggerDedupe(ctx, "billing", "ticket-1", base.Add(time.Minute), ttl)
	require.NoError(t, err)
	assert.True(t, got.Equal(base.Add(time.Millisecond)), "a repeated key returns the first due time: %v", got)

	// Keys are per job.
	got, err = s.TriggerDedupe(ctx, "billing", "ticket-2", base.Add(time.Minute), ttl)
	require.NoError(t, err)
	assert.True(t, got.Equal(base.Add(time.Minute)))
	got, err = s.TriggerDedupe(ctx, "payments", "ticket-1", base.Add(2*time.Minute), ttl)
	require.NoError(t, err)
	assert.True(t, got.Equal(base.Add(2*time.Minute)))

	// Racing callers agree on one due time.
	var wg sync.WaitGroup
	results := make([]time.Time, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := s.TriggerDedupe(ctx, "race", "k", base.Add(time.Duration(i)*time.Second), ttl)
			assert.NoError(t, err)
			results[i] = got
		}()
	}
	wg.Wait()
	for _, r := range results {
		assert.True(t, r.Equal(results[0]), "all callers see the winner: %v", results)
	}

	_, err = s.TriggerDedupe(ctx, "", "", time.Time{}, 0)
	require.ErrorIs(t, err, store.ErrInvalid)
	for _, want := range []string{"job id", "idempotency key", "due", "ttl"} {
		assert.ErrorContains(t, err, want)
	}
}
