package registry_test

import (
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/registry"
)

// TestSharedTopicIsOffByDefault: a registry configured with nothing about
// topics reads the team topics only, so a record on the shared
// sundial.jobs, which carries no identity, cannot take over another team's
// job; the gauge says ownership is enforced.
func TestSharedTopicIsOffByDefault(t *testing.T) {
	t.Parallel()
	s := newBackend(t).stack(t, "sharedoff")
	s.ensure(s.names.TeamJobsSpec("team-a"))
	metrics := prometheus.NewRegistry()
	r, err := registry.New(registry.Config{ // the defaults, as `sundial registry` has them
		Kafka: []kgo.Opt{kgo.SeedBrokers(s.brokers...)}, Topics: s.names, Group: "sharedoff", Store: s.store, Waker: s.waker,
		Registerer: metrics, Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	require.NoError(t, r.Start(t.Context()))
	t.Cleanup(r.Stop)
	assert.Equal(t, 1.0, gauge(t, metrics, "sundial_registry_ownership_enforced"))

	mine := cronSpec("team-a.report", "0 3 * * *")
	mine.OwnerTeam = "team-a"
	created := s.produceTo(s.names.TeamJobs("team-a"), jobRecord(t, mine, sundialv1.EncodingProtobuf))
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED, s.statuses.wait(t, 1, created...)[0].status.GetOutcome())

	// Team B, on the shared topic, claims the job; then team A changes it
	// on its own topic, whose answer says the registry has moved on.
	forged := cronSpec("team-a.report", "* * * * *")
	forged.OwnerTeam = "team-b"
	shared := s.produceTo(s.names.Jobs(), jobRecord(t, forged, sundialv1.EncodingProtobuf))
	changed := cronSpec("team-a.report", "0 4 * * *")
	changed.OwnerTeam = "team-a"
	after := s.produceTo(s.names.TeamJobs("team-a"), jobRecord(t, changed, sundialv1.EncodingProtobuf))
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UPDATED, s.statuses.wait(t, 1, after...)[0].status.GetOutcome())

	job, err := s.store.GetJob(t.Context(), "team-a.report")
	require.NoError(t, err)
	assert.Equal(t, s.revision(after[0]), job.Revision, "team A's change is in force")
	spec := &sundialv1.JobSpec{}
	require.NoError(t, sundialv1.EncodingProtobuf.Unmarshal(job.Spec, spec))
	assert.Equal(t, "team-a", spec.GetOwnerTeam())
	assert.Empty(t, s.statuses.answered(sourceOf(shared[0])), "the shared topic's record is not read")
}

// answered returns the answers read so far to the record at src.
func (r *statusReader) answered(src source) []answer {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.answers[src]
}
