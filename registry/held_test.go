package registry_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// testResumeReleasesHeld: the entries a dispatcher held while the job was
// paused stay held through another paused definition, and go back into the
// schedule, with their own due times, when a definition that is not paused
// is stored; the held set is then empty.
func testResumeReleasesHeld(t *testing.T, s *stack) {
	s.startRegistry("registry")
	const id = "held.release"
	ctx := t.Context()
	step := func(spec *sundialv1.JobSpec) *sundialv1.JobStatus {
		t.Helper()
		rec := jobRecord(t, spec, sundialv1.EncodingProtobuf)
		s.produce(rec)
		return s.statuses.wait(t, 1, rec)[0].status
	}
	spec := cronSpec(id, "0 3 * * *")
	require.True(t, step(spec).GetAccepted())
	paused := proto.Clone(spec).(*sundialv1.JobSpec)
	paused.Paused = true
	require.True(t, step(paused).GetAccepted())

	past := store.Truncate(time.Now().Add(-2 * time.Minute))
	held := []store.DueEntry{
		{Due: past, JobID: id, Kind: store.KindRetry, RunID: store.RunID(id, past.Add(-time.Hour)), Attempt: 2, Revision: 1, Payload: []byte("run")},
		{Due: past.Add(time.Second), JobID: id, Kind: store.KindTrigger, RunID: store.RunID(id, past.Add(time.Second)), Attempt: 1, Revision: 1},
	}
	require.NoError(t, s.store.HoldDue(ctx, held...))

	paused.Description = "still paused"
	require.True(t, step(paused).GetAccepted())
	still, err := s.store.ListHeld(ctx, id)
	require.NoError(t, err)
	assert.Len(t, still, 2, "a paused definition releases nothing")

	st := step(spec)
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UPDATED, st.GetOutcome())
	left, err := s.store.ListHeld(ctx, id)
	require.NoError(t, err)
	assert.Empty(t, left, "released")
	resumedAt := st.GetProcessedAt().AsTime()
	for i, e := range held {
		found := false
		for _, b := range []time.Time{resumedAt.Add(-time.Minute), resumedAt} {
			for _, got := range s.dueEntries(id, b) {
				if got.RunID == e.RunID && got.Kind == e.Kind {
					found = true
					assert.Equal(t, e.Payload, got.Payload)
					assert.Equal(t, e.Attempt, got.Attempt)
					assert.WithinDuration(t, resumedAt, got.Due, 10*time.Second, "due at the release")
					assert.NotEqual(t, e.Due, got.Due, "entry %d keeps no key a dispatcher saw fired", i)
				}
			}
		}
		assert.True(t, found, "entry %d back in the schedule", i)
	}

	// Entries left behind by a registry that died while releasing are
	// released when the same definition is processed again.
	require.NoError(t, s.store.HoldDue(ctx, held[0]))
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UNCHANGED, step(spec).GetOutcome())
	left, err = s.store.ListHeld(ctx, id)
	require.NoError(t, err)
	assert.Empty(t, left)

	// Deleting a paused job drops what it held.
	require.True(t, step(paused).GetAccepted())
	require.NoError(t, s.store.HoldDue(ctx, held...))
	tomb := &kgo.Record{Key: []byte(id)}
	s.produce(tomb)
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_DELETED, s.statuses.wait(t, 1, tomb)[0].status.GetOutcome())
	left, err = s.store.ListHeld(ctx, id)
	require.NoError(t, err)
	assert.Empty(t, left)
}

// testResumeFollowsMisfirePolicy: occurrences that fell due while the job
// was paused are not skipped on resume: the first due time is the first
// occurrence after the pause (FIRE_ALL), which the dispatcher then fires
// late under the policy.
func testResumeFollowsMisfirePolicy(t *testing.T, s *stack) {
	s.startRegistry("registry")
	const id = "held.misfire"
	step := func(spec *sundialv1.JobSpec, at time.Time) *sundialv1.JobStatus {
		t.Helper()
		rec := jobRecord(t, spec, sundialv1.EncodingProtobuf)
		rec.Timestamp = at
		s.produce(rec)
		return s.statuses.wait(t, 1, rec)[0].status
	}
	now := time.Now().UTC()
	pausedAt := now.Add(-10 * time.Minute).Truncate(time.Minute).Add(30 * time.Second)
	spec := cronSpec(id, "* * * * *")
	spec.Schedule.MisfirePolicy = sundialv1.MisfirePolicy_MISFIRE_POLICY_FIRE_ALL
	require.True(t, step(spec, pausedAt.Add(-time.Minute)).GetAccepted())
	paused := proto.Clone(spec).(*sundialv1.JobSpec)
	paused.Paused = true
	require.True(t, step(paused, pausedAt).GetAccepted())

	st := step(spec, now)
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UPDATED, st.GetOutcome())
	require.NotNil(t, st.GetNextDueTime(), "status %v", st)
	assert.Equal(t, pausedAt.Truncate(time.Minute).Add(time.Minute), st.GetNextDueTime().AsTime().UTC(), "the first occurrence after the pause")
}
