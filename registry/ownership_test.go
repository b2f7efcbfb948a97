package registry_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/audit"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/registry"
)

// produceTo produces records to topic and returns them with their offsets.
// revision is the revision rec's definition gets (topics.Names.Revision).
func (s *stack) revision(rec *kgo.Record) int64 { return s.names.Revision(rec.Topic, rec.Offset) }

func (s *stack) produceTo(topic string, recs ...*kgo.Record) []*kgo.Record {
	s.t.Helper()
	for _, r := range recs {
		r.Topic = topic
	}
	ctx, cancel := context.WithTimeout(s.t.Context(), time.Minute)
	defer cancel()
	require.NoError(s.t, s.producer.ProduceSync(ctx, recs...).FirstErr())
	return recs
}

// ensure creates topics of the stack beyond the ones every test has.
func (s *stack) ensure(specs ...topics.Spec) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.t.Context(), 2*time.Minute)
	defer cancel()
	_, err := topics.Ensure(ctx, kadm.NewClient(s.producer), specs, -1)
	require.NoError(s.t, err)
}

// testOwnership: with the shared topic off, the registry takes the team
// from the topic: a forged owner_team is rejected, another team can neither
// overwrite nor delete a job, the answer names no other team, and every
// accepted change (and only those) is in the audit trail with its diff and
// the retention as its TTL, and on sundial.audit.
func testOwnership(t *testing.T, s *stack) {
	s.ensure(s.names.TeamJobsSpec("team-a"), s.names.TeamJobsSpec("team-b"), s.names.AuditSpec())
	topicA, topicB := s.names.TeamJobs("team-a"), s.names.TeamJobs("team-b")
	const retention = time.Hour
	trail, err := audit.New(audit.Config{Store: s.store, Retention: retention})
	require.NoError(t, err)
	_, reg := s.startRegistry("ownership", func(c *registry.Config) {
		c.SharedTopic = false // the default
		c.Audit = trail
	})
	assert.Equal(t, 1.0, gauge(t, reg, "sundial_registry_ownership_enforced"))

	spec := cronSpec("team-a.own-1", "0 3 * * *")
	spec.OwnerTeam = "team-a"
	forged := cronSpec("team-b.own-2", "0 3 * * *")
	forged.OwnerTeam = "team-b"
	created := s.produceTo(topicA, jobRecord(t, spec, sundialv1.EncodingProtobuf), jobRecord(t, forged, sundialv1.EncodingJSON))
	got := s.statuses.wait(t, 1, created...)
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_CREATED, got[0].status.GetOutcome(), "%v", got[0].status)
	requireRejected(t, got[1].status, "owner_team")
	assert.True(t, got[0].status.GetOwnershipEnforced(), "the answer says ownership is enforced")
	assert.Contains(t, got[1].status.GetErrors()[0].GetReason(), topicA)

	// Team B claims team A's job on its own topic: as owner, then deleting it.
	stolen := cronSpec("team-a.own-1", "* * * * *")
	stolen.OwnerTeam = "team-b"
	attempts := s.produceTo(topicB, jobRecord(t, stolen, sundialv1.EncodingProtobuf), &kgo.Record{Key: []byte("team-a.own-1")})
	answers := s.statuses.wait(t, 1, attempts...)
	// The job is team A's: team B may not take it by naming itself owner.
	requireRejected(t, answers[0].status, "owner_team")
	assert.Contains(t, answers[0].status.GetErrors()[0].GetReason(), "belongs to another team")
	requireRejected(t, answers[1].status, "owner_team")
	assert.NotContains(t, answers[1].status.GetErrors()[0].GetReason(), `"team-a"`, "the delete's answer names the owner")
	job, err := s.store.GetJob(t.Context(), "team-a.own-1")
	require.NoError(t, err)
	assert.False(t, job.Deleted)
	assert.Equal(t, s.revision(created[0]), job.Revision, "team A's definition is in force")

	// Team A changes, resends unchanged, then deletes its job.
	changed := cronSpec("team-a.own-1", "0 4 * * *")
	changed.OwnerTeam = "team-a"
	changed.Description = "at four"
	// One timestamp for the three: the trail must order them by offset.
	at := time.Now().Truncate(time.Millisecond)
	own := []*kgo.Record{jobRecord(t, changed, sundialv1.EncodingProtobuf), jobRecord(t, changed, sundialv1.EncodingProtobuf), {Key: []byte("team-a.own-1")}}
	for _, r := range own {
		r.Timestamp = at
	}
	s.produceTo(topicA, own...)
	got = s.statuses.wait(t, 1, own...)
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UPDATED, got[0].status.GetOutcome(), "%v", got[0].status)
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_UNCHANGED, got[1].status.GetOutcome(), "%v", got[1].status)
	assert.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_DELETED, got[2].status.GetOutcome(), "%v", got[2].status)

	// The trail: created, updated, deleted, newest first; nothing for the
	// rejections or the unchanged resend.
	recs, err := trail.List(t.Context(), audit.Query{Subject: "team-a.own-1", Limit: 10})
	require.NoError(t, err)
	require.Len(t, recs, 3, "%+v", recs)
	actor := "kafka:" + topicA
	del, upd, cre := recs[0], recs[1], recs[2]
	assert.Equal(t, audit.ActionJobCreated, cre.Action)
	assert.Equal(t, audit.ActionJobUpdated, upd.Action)
	assert.Equal(t, audit.ActionJobDeleted, del.Action)
	for _, r := range recs {
		assert.Equal(t, actor, r.Actor)
		assert.Equal(t, "team-a", r.Team)
	}
	assert.Equal(t, int64(0), cre.RevisionBefore)
	assert.Equal(t, s.revision(created[0]), cre.RevisionAfter)
	assert.Equal(t, s.revision(created[0]), upd.RevisionBefore)
	assert.Equal(t, s.revision(own[0]), upd.RevisionAfter)
	assert.Equal(t, s.revision(own[0]), del.RevisionBefore)
	assert.Equal(t, []audit.Change{
		{Field: "schedule.cron.expression", Before: `"0 3 * * *"`, After: `"0 4 * * *"`},
		{Field: "description", After: `"at four"`},
	}, upd.Changes)
	assert.Contains(t, cre.Changes, audit.Change{Field: "owner_team", After: `"team-a"`})
	assert.Contains(t, del.Changes, audit.Change{Field: "description", Before: `"at four"`})

	byTeam, err := trail.List(t.Context(), audit.Query{Team: "team-a", Limit: 10})
	require.NoError(t, err)
	assert.Len(t, byTeam, 3)
	none, err := trail.List(t.Context(), audit.Query{Team: "team-b", Limit: 10})
	require.NoError(t, err)
	assert.Empty(t, none, "a rejected attempt leaves no record")

	// Retention: every row carries the trail's TTL.
	sess := s.backend.session(t)
	for _, table := range []string{"audit_by_subject WHERE subject = 'team-a.own-1'", "audit_by_team WHERE team = 'team-a'"} {
		iter := sess.Query("SELECT TTL(actor) FROM " + s.backend.cassandra.Keyspace + "." + table).Iter()
		var ttl int
		n := 0
		for iter.Scan(&ttl) {
			n++
			assert.Greater(t, ttl, int(retention.Seconds())-600, table)
			assert.LessOrEqual(t, ttl, int(retention.Seconds()), table)
		}
		require.NoError(t, iter.Close())
		assert.Equal(t, 3, n, table)
	}

	// The feed: the same records on sundial.audit.
	feed := readAudit(t, s, 3)
	assert.ElementsMatch(t, []string{cre.ID, upd.ID, del.ID}, []string{feed[0].ID, feed[1].ID, feed[2].ID})
}

func requireRejected(t *testing.T, st *sundialv1.JobStatus, field string) {
	t.Helper()
	require.Equal(t, sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_REJECTED, st.GetOutcome(), "%v", st)
	require.False(t, st.GetAccepted())
	require.Len(t, st.GetErrors(), 1, "%v", st)
	require.Equal(t, field, st.GetErrors()[0].GetField(), "%v", st)
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// session opens a CQL session on the backend's keyspace.
func (b *backend) session(t *testing.T) *gocql.Session {
	t.Helper()
	cluster := gocql.NewCluster(b.cassandra.Hosts...)
	cluster.Keyspace = b.cassandra.Keyspace
	cluster.Timeout = 30 * time.Second
	sess, err := cluster.CreateSession()
	require.NoError(t, err)
	t.Cleanup(sess.Close)
	return sess
}

// readAudit reads n records of the stack's sundial.audit.
func readAudit(t *testing.T, s *stack, n int) []audit.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.brokers...), kgo.ConsumeTopics(s.names.Audit()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var out []audit.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d audit records", len(out), n)
		fs.EachRecord(func(r *kgo.Record) {
			var rec audit.Record
			require.NoError(t, json.Unmarshal(r.Value, &rec))
			assert.Equal(t, rec.Subject, string(r.Key))
			out = append(out, rec)
		})
	}
	return out
}
