package operator

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
	"github.com/sundialhq/sundial/store/memory"
)

type capturedEntries struct {
	mu      sync.Mutex
	entries []store.DueEntry
}

func (c *capturedEntries) Enqueue(_ context.Context, es ...store.DueEntry) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = append(c.entries, es...)
	return nil
}

func TestRetryDecision(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		state store.RunState
		ok    bool
	}{
		{store.StateFailed, true}, // FAILED, TIMED_OUT and DEAD
		{store.StateCancelled, true},
		{store.StateScheduled, false},
		{store.StateRunning, false},
		{store.StateSucceeded, false},
		{store.StateSkipped, false},
		{store.StateSuspended, false},
	} {
		t.Run(string(c.state), func(t *testing.T) {
			t.Parallel()
			err := RetryDecision(store.RunRecord{RunID: "j@1", Attempt: 2, State: c.state})
			if c.ok {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrNotRetryable)
			assert.ErrorContains(t, err, "attempt 2 is "+string(c.state))
		})
	}
}

// TestRetryRunsTheCurrentDefinitionAsANewAttempt: a failed run is retried
// with the job's definition in force (not the one it failed with), as the
// attempt after its last, with the whole retry budget; the retry is in the
// history at once, so a second one is refused; a run that succeeded is
// refused naming its state; an unknown run is not found.
func TestRetryRunsTheCurrentDefinitionAsANewAttempt(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := memory.New(memory.Options{})
	require.NoError(t, err)
	_, err = st.InitCluster(ctx, 1)
	require.NoError(t, err)
	now := time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)
	spec := cronJob("team.job", "0 * * * *")
	spec.Payload = []byte("fixed")
	value, err := proto.Marshal(spec)
	require.NoError(t, err)
	_, err = st.UpsertJob(ctx, store.Job{ID: spec.GetId(), Spec: value, Revision: 7, UpdatedAt: now.Add(-time.Minute)})
	require.NoError(t, err)
	due := now.Add(-time.Hour)
	failed := store.RunID("team.job", due)
	ok := store.RunID("team.job", due.Add(-time.Hour))
	for _, r := range []store.RunRecord{
		{JobID: "team.job", RunID: failed, Attempt: 1, Due: due, State: store.StateFailed, UpdatedAt: due.Add(time.Second)},
		{JobID: "team.job", RunID: failed, Attempt: 2, Due: due, State: store.StateFailed, Error: "dead: http_500", UpdatedAt: due.Add(time.Minute)},
		{JobID: "team.job", RunID: ok, Attempt: 1, Due: due.Add(-time.Hour), State: store.StateSucceeded, UpdatedAt: due},
	} {
		require.NoError(t, st.RecordRun(ctx, r))
	}
	enq := &capturedEntries{}
	op := New(Config{Jobs: st, History: st, Enqueuer: enq, Now: func() time.Time { return now }})

	res, err := op.Retry(ctx, failed)
	require.NoError(t, err)
	assert.Equal(t, RetryResult{JobID: "team.job", Attempt: 3}, res)
	require.Len(t, enq.entries, 1)
	e := enq.entries[0]
	assert.Equal(t, store.KindRetry, e.Kind)
	assert.Equal(t, failed, e.RunID)
	assert.Equal(t, 3, e.Attempt)
	assert.True(t, e.Due.Equal(now))
	assert.Equal(t, int64(7), e.Revision)
	run := &sundialv1.Run{}
	require.NoError(t, proto.Unmarshal(e.Payload, run))
	assert.Equal(t, []byte("fixed"), run.GetPayload(), "the current definition's payload")
	assert.True(t, proto.Equal(spec.GetTarget(), run.GetTarget()))
	assert.Equal(t, int64(7), run.GetDefinitionOffset())
	assert.Equal(t, uint32(3), run.GetAttempt())
	assert.Equal(t, uint32(2), run.GetAttemptsBeforeReplay(), "the new attempt has the whole retry budget")
	assert.True(t, run.GetDueTime().AsTime().Equal(due), "the run keeps its due time")
	assert.Equal(t, sundialv1.RunOrigin_RUN_ORIGIN_REPLAY, run.GetOrigin())

	_, err = op.Retry(ctx, failed)
	require.ErrorIs(t, err, ErrNotRetryable, "the retried run is scheduled")
	assert.ErrorContains(t, err, "attempt 3 is scheduled")
	_, err = op.Retry(ctx, ok)
	require.ErrorIs(t, err, ErrNotRetryable)
	assert.ErrorContains(t, err, "attempt 1 is succeeded")
	_, err = op.Retry(ctx, store.RunID("team.job", now))
	require.ErrorIs(t, err, ErrNotFound, "no history")
	_, err = op.Retry(ctx, store.RunID("team.gone", now))
	require.ErrorIs(t, err, ErrNotFound, "no such job")
	assert.Len(t, enq.entries, 1, "nothing more enqueued")

	// A cancelled run's cancel marker must go first, or the new attempt
	// would end CANCELLED too: without Redis it is not retried.
	cancelled := store.RunID("team.job", due.Add(-2*time.Hour))
	require.NoError(t, st.RecordRun(ctx, store.RunRecord{JobID: "team.job", RunID: cancelled, Attempt: 1, Due: due.Add(-2 * time.Hour),
		State: store.StateCancelled, UpdatedAt: due}))
	_, err = op.Retry(ctx, cancelled)
	require.ErrorContains(t, err, "Config.Redis: required")
	assert.Len(t, enq.entries, 1, "nothing more enqueued")
}
