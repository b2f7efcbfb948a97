package cassandra_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/audit"
	"github.com/sundialhq/sundial/store"
)

// TestAuditRecords: records come back newest first by subject or by team,
// with their changes; Since and Limit select; a record without a team is
// listed by subject only; rewriting an ID replaces the row; a TTL under a
// second is refused.
func TestAuditRecords(t *testing.T) {
	t.Parallel()
	_, s := setup(t)
	ctx := t.Context()
	base := time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC)
	rec := func(i int, subject, team string) audit.Record {
		return audit.Record{
			ID: fmt.Sprintf("r%02d", i), At: base.Add(time.Duration(i) * time.Minute), Actor: "token:t", Action: "job.updated",
			Subject: subject, Team: team, RevisionBefore: int64(i), RevisionAfter: int64(i + 1),
			Changes: []audit.Change{{Field: "paused", After: "true"}}, Detail: "d",
		}
	}
	for i := range 5 {
		require.NoError(t, s.PutAudit(ctx, rec(i, "j", "a"), time.Hour))
	}
	require.NoError(t, s.PutAudit(ctx, rec(5, "k", "a"), time.Hour))
	require.NoError(t, s.PutAudit(ctx, rec(6, "j", ""), time.Hour))
	again := rec(4, "j", "a")
	again.Detail = "rewritten"
	require.NoError(t, s.PutAudit(ctx, again, time.Hour))

	ids := func(q audit.Query) []string {
		t.Helper()
		recs, err := s.ListAudit(ctx, q)
		require.NoError(t, err)
		var out []string
		for _, r := range recs {
			out = append(out, r.ID)
		}
		return out
	}
	assert.Equal(t, []string{"r06", "r04", "r03", "r02", "r01", "r00"}, ids(audit.Query{Subject: "j", Limit: 10}))
	assert.Equal(t, []string{"r05", "r04", "r03", "r02", "r01", "r00"}, ids(audit.Query{Team: "a", Limit: 10}))
	assert.Equal(t, []string{"r05", "r04"}, ids(audit.Query{Team: "a", Limit: 2}))
	assert.Equal(t, []string{"r06", "r04", "r03"}, ids(audit.Query{Subject: "j", Since: base.Add(3 * time.Minute), Limit: 10}))

	recs, err := s.ListAudit(ctx, audit.Query{Subject: "j", Limit: 2})
	require.NoError(t, err)
	assert.Equal(t, rec(6, "j", ""), recs[0])
	assert.Equal(t, again, recs[1])

	_, err = s.ListAudit(ctx, audit.Query{Limit: 1})
	assert.ErrorIs(t, err, audit.ErrInvalid)
	assert.ErrorIs(t, s.PutAudit(ctx, rec(7, "j", "a"), 500*time.Millisecond), store.ErrInvalid)
}

// TestAuditRecordsInOneCall: records of many subjects and teams written in
// one PutAudits call (a team's rows more than one batch holds, records
// without a team among them) are all listed, by subject and by team, as
// records written one by one are.
func TestAuditRecordsInOneCall(t *testing.T) {
	t.Parallel()
	_, s := setup(t)
	ctx := t.Context()
	base := time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)
	teams := []string{"a", "b", ""}
	var recs []audit.Record
	want := map[string][]string{} // "subject/x" or "team/x" -> ids, newest first
	for i := range 450 {
		r := audit.Record{
			ID: fmt.Sprintf("r%03d", i), At: base.Add(time.Duration(i) * time.Second), Actor: "kafka:jobs", Action: "job.created",
			Subject: fmt.Sprintf("job-%02d", i%40), Team: teams[i%len(teams)], RevisionAfter: int64(i),
			Changes: []audit.Change{{Field: "schedule", After: fmt.Sprintf("every %ds", i+1)}},
		}
		recs = append(recs, r)
		want["subject/"+r.Subject] = append([]string{r.ID}, want["subject/"+r.Subject]...)
		if r.Team != "" {
			want["team/"+r.Team] = append([]string{r.ID}, want["team/"+r.Team]...)
		}
	}
	require.NoError(t, s.PutAudits(ctx, recs, time.Hour))

	got := map[string][]string{}
	for key := range want {
		q := audit.Query{Limit: 1000}
		if team, ok := strings.CutPrefix(key, "team/"); ok {
			q.Team = team
		} else {
			q.Subject = strings.TrimPrefix(key, "subject/")
		}
		listed, err := s.ListAudit(ctx, q)
		require.NoError(t, err)
		for _, r := range listed {
			got[key] = append(got[key], r.ID)
		}
	}
	assert.Equal(t, want, got)
	assert.Len(t, want["team/a"], 150)
}
