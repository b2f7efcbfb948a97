package memory_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/memory"
	"github.com/sundialhq/sundial/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := memory.New(memory.Options{})
		require.NoError(t, err)
		return s
	})
}

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestRunRetention(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	s, err := memory.New(memory.Options{Now: clock.Now, RunRetention: time.Hour})
	require.NoError(t, err)
	ctx := context.Background()
	rec := func(due time.Time) store.RunRecord {
		return store.RunRecord{JobID: "j", RunID: store.RunID("j", due), Attempt: 1, Due: due, State: store.StateSucceeded, UpdatedAt: due}
	}
	require.NoError(t, s.RecordRun(ctx, rec(clock.Now())))
	clock.Advance(40 * time.Minute)
	require.NoError(t, s.RecordRun(ctx, rec(clock.Now())))

	runs, err := s.ListRuns(ctx, "j", 10)
	require.NoError(t, err)
	assert.Len(t, runs, 2)

	clock.Advance(21 * time.Minute) // the first is 61 minutes old
	runs, err = s.ListRuns(ctx, "j", 10)
	require.NoError(t, err)
	require.Len(t, runs, 1)
	assert.True(t, runs[0].Due.Equal(clock.Now().Add(-21*time.Minute)))

	clock.Advance(time.Hour)
	sum, err := s.JobSummary(ctx, "j")
	require.NoError(t, err)
	assert.Equal(t, store.Summary{JobID: "j"}, sum, "all history expired")
}

func TestNewRejectsNegativeRetention(t *testing.T) {
	t.Parallel()
	_, err := memory.New(memory.Options{RunRetention: -time.Second})
	require.ErrorContains(t, err, "run retention")
}
