package registry_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// testJobIDsAreNamespacedByTeam: a job cannot take a DAG inline node's id
// (<dag id>/<node id>), nor an id with an empty segment. A job stored before
// the rule (a legacy id) is kept: its owner may update and delete it, no
// other team may.
func testJobIDsAreNamespacedByTeam(t *testing.T, s *stack) {
	s.startRegistry("registry")

	// An inline node's id of team B's DAG, dots.
	squat := cronSpec("team-b.dagx/n", "0 3 * * *")
	squat.OwnerTeam = "team-a"
	dots := cronSpec("team-a..x", "0 3 * * *")
	good := cronSpec("team-a.x", "0 3 * * *")
	recs := s.produce(jobRecord(t, squat, sundialv1.EncodingJSON),
		jobRecord(t, dots, sundialv1.EncodingJSON), jobRecord(t, good, sundialv1.EncodingJSON))
	got := s.statuses.wait(t, 1, recs...)
	for i := range 2 {
		requireRejected(t, got[i].status, "id")
	}
	require.Contains(t, got[0].status.GetErrors()[0].GetReason(), `contains "/"`)
	require.Contains(t, got[1].status.GetErrors()[0].GetReason(), "empty segment")
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED, got[2].status.GetOutcome(), "%v", got[2].status)

	// A job stored before the rule, at revision 0 so that any record of its
	// key (offset 1 or more: another team's comes first) is newer.
	legacy := cronSpec("team-a.nightly/legacy", "0 3 * * *")
	legacy.OwnerTeam = "team-a"
	b, err := proto.Marshal(legacy)
	require.NoError(t, err)
	_, err = s.store.UpsertJobs(t.Context(), []store.Job{{ID: legacy.Id, Spec: b, Revision: 0, UpdatedAt: time.Now()}})
	require.NoError(t, err)

	taken := proto.Clone(legacy).(*sundialv1.JobSpec)
	taken.OwnerTeam = "team-b"
	changed := proto.Clone(legacy).(*sundialv1.JobSpec)
	changed.Description = "still running"
	fresh := cronSpec("team-a.fresh/n", "0 3 * * *")
	fresh.OwnerTeam = "team-a"
	recs = s.produce(jobRecord(t, taken, sundialv1.EncodingJSON), jobRecord(t, changed, sundialv1.EncodingJSON),
		jobRecord(t, fresh, sundialv1.EncodingJSON), &kgo.Record{Key: []byte(legacy.Id)})
	got = s.statuses.wait(t, 1, recs...)
	requireRejected(t, got[0].status, "id")
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UPDATED, got[1].status.GetOutcome(), "the owner updates its legacy job: %v", got[1].status)
	requireRejected(t, got[2].status, "id")
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_DELETED, got[3].status.GetOutcome(), fmt.Sprint(got[3].status))
}
