package dispatcher

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// TestPausedJobHoldsEntries: on the real stack, a paused job's pending
// retry (carrying its run) and trigger do not fire: they move to the job's
// held set and the shard's watermark passes them. They survive a
// dispatcher restart, and once the job is resumed (its held entries put
// back due at once with wake-ups, as the registry does) they fire late, once each, the
// retry with its attempt and origin.
func TestPausedJobHoldsEntries(t *testing.T) {
	t.Parallel()
	s := newStack(t, 2)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	d1 := s.dispatcher("hold-1")
	s.waitOwned(d1)

	const id = "paused.job"
	spec := jobSpec(id, cronSchedule("0 3 * * *", "UTC"))
	put := func(spec *sundialv1.JobSpec, rev int64) {
		t.Helper()
		value, err := proto.Marshal(spec)
		require.NoError(t, err)
		_, err = s.store.UpsertJob(ctx, store.Job{ID: id, Spec: value, Revision: rev, UpdatedAt: time.Now()})
		require.NoError(t, err)
	}
	paused := proto.Clone(spec).(*sundialv1.JobSpec)
	paused.Paused = true
	put(paused, 2)

	due := store.Truncate(time.Now().Add(time.Second))
	retryRun := &sundialv1.Run{RunId: store.RunID(id, due.Add(-time.Hour)), JobId: id, Attempt: 3, AttemptDueTime: timestamppb.New(due), Origin: sundialv1.RunOrigin_RUN_ORIGIN_RETRY}
	payload, err := proto.Marshal(retryRun)
	require.NoError(t, err)
	entries := []store.DueEntry{
		{Due: due, JobID: id, Kind: store.KindRetry, RunID: retryRun.GetRunId(), Attempt: 3, Revision: 2, Payload: payload},
		{Due: due.Add(10 * time.Millisecond), JobID: id, Kind: store.KindTrigger, RunID: store.RunID(id, due.Add(10*time.Millisecond)), Attempt: 1, Revision: 2},
	}
	require.NoError(t, s.enqueuer.Enqueue(ctx, entries...))

	var held []store.DueEntry
	require.Eventually(t, func() bool {
		held, err = s.store.ListHeld(ctx, id)
		require.NoError(t, err)
		return len(held) == len(entries)
	}, time.Minute, 50*time.Millisecond, "entries of the paused job not held")
	assert.Equal(t, entries, held)
	shard := store.ShardOf(id, s.shards)
	require.Eventually(t, func() bool {
		st, err := s.store.GetShard(ctx, shard)
		require.NoError(t, err)
		return st.Watermark.After(entries[1].Due)
	}, time.Minute, 50*time.Millisecond, "the watermark does not pass held entries")
	assert.Empty(t, s.runs.jobRuns(id), "a held entry fired")

	// A restart loses nothing: the held set is not the shard's.
	d1.Stop()
	d2 := s.dispatcher("hold-2")
	s.waitOwned(d2)
	held, err = s.store.ListHeld(ctx, id)
	require.NoError(t, err)
	assert.Len(t, held, len(entries))

	put(spec, 3)
	released := make([]store.DueEntry, len(held))
	now := store.Truncate(time.Now())
	for i, e := range held {
		e.Due = now.Add(time.Duration(i) * time.Millisecond)
		released[i] = e
	}
	require.NoError(t, s.enqueuer.Enqueue(ctx, released...))
	keys := make([]store.DueKey, len(held))
	for i, e := range held {
		keys[i] = e.Key()
	}
	require.NoError(t, s.store.DeleteHeld(ctx, keys...))

	require.Eventually(t, func() bool { return len(s.runs.jobRuns(id)) >= len(entries) }, time.Minute, 50*time.Millisecond, "resumed entries did not fire")
	runs := s.runs.jobRuns(id)
	require.Len(t, runs, len(entries), "each fires once")
	byID := map[string]*sundialv1.Run{}
	for _, r := range runs {
		byID[r.GetRunId()] = r
	}
	require.Contains(t, byID, retryRun.GetRunId())
	assert.Equal(t, uint32(3), byID[retryRun.GetRunId()].GetAttempt())
	assert.Equal(t, sundialv1.RunOrigin_RUN_ORIGIN_RETRY, byID[retryRun.GetRunId()].GetOrigin())
	require.Contains(t, byID, entries[1].RunID)
	assert.Equal(t, sundialv1.RunOrigin_RUN_ORIGIN_TRIGGER, byID[entries[1].RunID].GetOrigin())
	left, err := s.store.ListHeld(ctx, id)
	require.NoError(t, err)
	assert.Empty(t, left)
}
