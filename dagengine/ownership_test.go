package dagengine_test

import (
	"context"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// testTeamOwnership: on a team's topic a DAG must name that team as
// owner_team, and another team can neither overwrite nor delete it, with or
// without the kind header. Its engine's new group answers the records of
// earlier scenarios again, so answers are matched by their source.
func testTeamOwnership(s *stack, _ *simRunner) {
	t := s.t
	topicA, topicB := s.names.TeamJobs("team-a"), s.names.TeamJobs("team-b")
	_, err := topics.Ensure(s.ctx, kadm.NewClient(s.client), []topics.Spec{s.names.TeamJobsSpec("team-a"), s.names.TeamJobsSpec("team-b")}, 1)
	require.NoError(t, err)
	s.engine("owners", nil)

	dag := func(topic, id, team string) *kgo.Record {
		value := `{"id":"` + id + `","ownerTeam":"` + team + `","nodes":[{"id":"a","jobId":"j"}]}`
		return &kgo.Record{Topic: topic, Key: []byte(id), Value: []byte(value), Headers: []kgo.RecordHeader{
			{Key: sundialv1.HeaderKind, Value: []byte(sundialv1.KindDag)}, {Key: sundialv1.HeaderContentType, Value: []byte("application/json")},
		}}
	}
	produce := func(recs ...*kgo.Record) []*kgo.Record {
		for _, r := range recs {
			require.NoError(t, s.client.ProduceSync(s.ctx, r).FirstErr())
		}
		return recs
	}
	got := s.answers(produce(dag(topicA, "own.dag", "team-a"), dag(topicA, "own.forged", "team-b"))...)
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED, got[0].GetOutcome(), "%v", got[0])
	requireOwnerRejected(t, got[1])

	// Team B, in order on one partition: a job tombstone (no kind header,
	// no answer from the engine), a DAG tombstone, a takeover.
	tomb := dag(topicB, "own.dag", "")
	tomb.Value = nil
	recs := produce(&kgo.Record{Topic: topicB, Key: []byte("own.dag")}, tomb, dag(topicB, "own.dag", "team-b"))
	for _, st := range s.answers(recs[1:]...) {
		requireOwnerRejected(t, st)
		assert.NotContains(t, st.GetErrors()[0].GetReason(), "team-a")
	}
	d, err := s.store.GetDag(s.ctx, "own.dag")
	require.NoError(t, err)
	assert.False(t, d.Deleted, "team B deleted team A's DAG")
	spec := &sundialv1.DagSpec{}
	require.NoError(t, sundialv1.Unmarshal("", d.Spec, spec))
	assert.Equal(t, "team-a", spec.GetOwnerTeam())
}

func requireOwnerRejected(t interface {
	require.TestingT
	Helper()
}, st *sundialv1.JobStatus) {
	t.Helper()
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_REJECTED, st.GetOutcome(), "%v", st)
	require.Len(t, st.GetErrors(), 1, "%v", st)
	require.Equal(t, "owner_team", st.GetErrors()[0].GetField(), "%v", st)
}

// answers reads sundial.jobs.status until each record has an answer and
// returns the first answer of each.
func (s *stack) answers(recs ...*kgo.Record) []*sundialv1.JobStatus {
	s.t.Helper()
	type src struct {
		topic     string
		partition int32
		offset    int64
	}
	want := map[src]int{}
	for i, r := range recs {
		want[src{r.Topic, r.Partition, r.Offset}] = i
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.brokers...), kgo.ConsumeTopics(s.names.JobsStatus()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(s.t, err)
	defer cl.Close()
	out := make([]*sundialv1.JobStatus, len(recs))
	for missing := len(recs); missing > 0; {
		ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
		fetches := cl.PollFetches(ctx)
		err := ctx.Err()
		cancel()
		require.NoError(s.t, err, "waiting for %d answers, %d missing", len(recs), missing)
		fetches.EachRecord(func(rec *kgo.Record) {
			st := &sundialv1.JobStatus{}
			require.NoError(s.t, sundialv1.Unmarshal(contentTypeOf(rec), rec.Value, st))
			so := st.GetSource()
			if i, ok := want[src{so.GetTopic(), so.GetPartition(), so.GetOffset()}]; ok && out[i] == nil {
				out[i] = st
				missing--
			}
		})
	}
	return out
}
