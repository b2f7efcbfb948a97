package registry_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/registry"
)

// TestUpgradeKeepsSharedTopicJobs moves an installation from the shared
// sundial.jobs to team topics as CHANGELOG.md says: a job defined on the
// shared topic (at offsets far past those of the new team topic) is
// changed by its team's first definition on its own topic, the shared
// topic can no longer change it, and after the restart that stops reading
// the shared topic the job is still there and its team deletes it.
func TestUpgradeKeepsSharedTopicJobs(t *testing.T) {
	t.Parallel()
	s := newBackend(t).stack(t, "upgrade")
	s.ensure(s.names.TeamJobsSpec("team-a"))
	// Step 2 of the move: the registry reads both.
	moving, _ := s.startRegistry("upgrade-move")

	const id = "legacy-report" // an id of before the move
	spec := func(cron string) *sundialv1.JobSpec {
		j := cronSpec(id, cron)
		j.OwnerTeam = "team-a"
		return j
	}
	var old []*kgo.Record
	for _, cron := range []string{"0 1 * * *", "0 2 * * *", "0 3 * * *"} {
		old = append(old, s.produce(jobRecord(t, spec(cron), sundialv1.EncodingProtobuf))...)
	}
	answers := s.statuses.wait(t, 1, old...)
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UPDATED, answers[2].status.GetOutcome(), "%v", answers[2].status)
	require.Greater(t, old[2].Offset, int64(0))

	// Step 3: the team writes its own topic, whose offsets start at 0.
	moved := s.produceTo(s.names.TeamJobs("team-a"), jobRecord(t, spec("0 4 * * *"), sundialv1.EncodingProtobuf))
	got := s.statuses.wait(t, 1, moved...)[0].status
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UPDATED, got.GetOutcome(), "the team's first definition on its topic replaces the shared one: %v", got)
	job, err := s.store.GetJob(t.Context(), id)
	require.NoError(t, err)
	assert.Equal(t, s.revision(moved[0]), job.Revision)

	// The shared topic cannot change the moved job any more.
	late := s.produce(jobRecord(t, spec("0 5 * * *"), sundialv1.EncodingProtobuf))
	got = s.statuses.wait(t, 1, late...)[0].status
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_STALE, got.GetOutcome(), "%v", got)

	// Step 4: a registry with the defaults (team topics only) takes over;
	// the job is kept, and its team deletes it on its own topic.
	moving.Stop()
	_, _ = s.startRegistry("upgrade-after", func(c *registry.Config) { c.SharedTopic = false })
	job, err = s.store.GetJob(t.Context(), id)
	require.NoError(t, err)
	require.False(t, job.Deleted)
	gone := s.produceTo(s.names.TeamJobs("team-a"), &kgo.Record{Key: []byte(id)})
	got = s.statuses.wait(t, 1, gone...)[0].status
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_DELETED, got.GetOutcome(), "%v", got)
	job, err = s.store.GetJob(t.Context(), id)
	require.NoError(t, err)
	assert.True(t, job.Deleted)
}
