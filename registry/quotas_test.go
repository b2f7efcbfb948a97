package registry_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/quota"
	"github.com/sundialhq/sundial/registry"
)

// testMaxJobs: a team at its max_jobs cannot create a job, but can update
// and delete its jobs; a delete makes room; a redelivered create counts
// once.
func testMaxJobs(t *testing.T, s *stack) {
	ctx := t.Context()
	team := "quota-" + strings.ToLower(t.Name()[len("TestOnRealStack/"):])
	require.NoError(t, s.store.SetQuota(ctx, quota.Quota{Team: team, MaxJobs: 2}))
	_, reg := s.startRegistry("registry", func(c *registry.Config) { c.Quotas = s.store })

	spec := func(id, expr string) *sundialv1.JobSpec {
		sp := cronSpec(team+"."+id, expr)
		sp.OwnerTeam = team
		return sp
	}
	var all []*kgo.Record
	step := func(sp *sundialv1.JobSpec) *sundialv1.JobStatus {
		t.Helper()
		rec := s.produce(jobRecord(t, sp, sundialv1.EncodingProtobuf))[0]
		all = append(all, rec)
		return s.statuses.wait(t, 1, rec)[0].status
	}
	tombstone := func(id string) *sundialv1.JobStatus {
		t.Helper()
		rec := s.produce(&kgo.Record{Key: []byte(team + "." + id)})[0]
		all = append(all, rec)
		return s.statuses.wait(t, 1, rec)[0].status
	}
	outcome := func(st *sundialv1.JobStatus) sundialv1.DefinitionOutcome { return st.GetOutcome() }
	count := func() int {
		n, err := s.store.CountTeamJobs(ctx, team)
		require.NoError(t, err)
		return n
	}

	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED, outcome(step(spec("a", "0 1 * * *"))))
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED, outcome(step(spec("b", "0 1 * * *"))))
	require.Equal(t, 2, count())

	over := step(spec("c", "0 1 * * *"))
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_REJECTED, outcome(over), "status %v", over)
	require.Len(t, over.GetErrors(), 1)
	require.Equal(t, "owner_team", over.GetErrors()[0].GetField())
	require.Equal(t, "team "+team+" has 2 of 2 jobs (quota max_jobs)", over.GetErrors()[0].GetReason())
	_, err := s.store.GetJob(ctx, team+".c")
	require.Error(t, err, "a rejected job was stored")

	// At the limit, an update and a resend of the same definition pass.
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UPDATED, outcome(step(spec("a", "0 2 * * *"))))
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UNCHANGED, outcome(step(spec("a", "0 2 * * *"))))
	require.Equal(t, 2, count())

	// A delete makes room for one more.
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_DELETED, outcome(tombstone("b")))
	require.Equal(t, 1, count())
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED, outcome(step(spec("c", "0 1 * * *"))))
	require.Equal(t, 2, count())
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_REJECTED, outcome(step(spec("b", "0 1 * * *"))))

	require.Equal(t, 2.0, counter(t, reg, "sundial_registry_quota_rejections_total", "quota", "max_jobs"))

	// A replay of the whole topic by another group counts every job once:
	// the jobs are a, c (created, updated, created after b's delete).
	s.startRegistry("replay", func(c *registry.Config) { c.Quotas = s.store })
	s.statuses.wait(t, 2, all...)
	require.Equal(t, 2, count(), "after a replay of the topic")
}

// TestBulkApplyCannotExceedMaxJobs: five creates of a team with max_jobs 2
// arrive at once (one bulk apply) and the registry handles them
// concurrently. Exactly two are created, the rest refused naming the
// quota, and the team's index holds two jobs. Before, each create counted
// the jobs before the others were indexed, and all of them passed.
func TestBulkApplyCannotExceedMaxJobs(t *testing.T) {
	t.Parallel()
	s := newBackend(t).stack(t, "bulkmaxjobs")
	ctx := t.Context()
	const team = "bulk-quota"
	require.NoError(t, s.store.SetQuota(ctx, quota.Quota{Team: team, MaxJobs: 2}))
	s.startRegistry("registry", func(c *registry.Config) { c.Quotas = s.store })

	var recs []*kgo.Record
	for i := range 5 {
		sp := cronSpec(fmt.Sprintf("%s.job-%d", team, i), "0 1 * * *")
		sp.OwnerTeam = team
		recs = append(recs, jobRecord(t, sp, sundialv1.EncodingProtobuf))
	}
	s.produce(recs...) // one produce call: the records arrive together
	created, refused := 0, 0
	for _, a := range s.statuses.wait(t, 1, recs...) {
		switch a.status.GetOutcome() {
		case sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED:
			created++
		case sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_REJECTED:
			refused++
			require.Equal(t, "team "+team+" has 2 of 2 jobs (quota max_jobs)", a.status.GetErrors()[0].GetReason())
		default:
			t.Fatalf("unexpected answer %v", a.status)
		}
	}
	require.Equal(t, 2, created, "a bulk apply of 5 creates with max_jobs 2 created %d jobs", created)
	require.Equal(t, 3, refused)
	n, err := s.store.CountTeamJobs(ctx, team)
	require.NoError(t, err)
	require.Equal(t, 2, n, "jobs in the team's index")
}

// TestRaisedMaxJobsAppliesAtOnce: a team at its max_jobs is refused a
// create; its limit is raised; the very next create passes, though the
// registry's copy of the quotas is younger than its TTL. Before, the old
// limit was quoted until the copy was 10 s old.
func TestRaisedMaxJobsAppliesAtOnce(t *testing.T) {
	t.Parallel()
	s := newBackend(t).stack(t, "raisedmaxjobs")
	ctx := t.Context()
	const team = "raised-quota"
	require.NoError(t, s.store.SetQuota(ctx, quota.Quota{Team: team, MaxJobs: 1}))
	s.startRegistry("registry", func(c *registry.Config) {
		c.Quotas = s.store
		c.QuotaTTL = time.Hour // the copy cannot expire during the test
	})
	step := func(id string) *sundialv1.JobStatus {
		t.Helper()
		sp := cronSpec(team+"."+id, "0 1 * * *")
		sp.OwnerTeam = team
		rec := s.produce(jobRecord(t, sp, sundialv1.EncodingProtobuf))[0]
		return s.statuses.wait(t, 1, rec)[0].status
	}
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED, step("a").GetOutcome())
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_REJECTED, step("b").GetOutcome())

	require.NoError(t, s.store.SetQuota(ctx, quota.Quota{Team: team, MaxJobs: 3}))
	st := step("c")
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED, st.GetOutcome(), "after raising max_jobs to 3: %v", st)
}
