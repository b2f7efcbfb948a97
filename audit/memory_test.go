package audit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/audit"
)

func TestMemoryListsASubjectOrATeamNewestFirst(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	m := audit.NewMemory()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := func(id, subject, team string, after time.Duration) audit.Record {
		return audit.Record{ID: id, At: at.Add(after), Actor: "token:t", Action: audit.ActionJobUpdated, Subject: subject, Team: team}
	}
	require.NoError(t, m.PutAudits(ctx, []audit.Record{
		rec("1", "a", "blue", 0), rec("2", "b", "blue", time.Second), rec("3", "a", "blue", 2*time.Second), rec("4", "c", "red", 3*time.Second),
	}, time.Hour))
	// Writing an ID again replaces it.
	again := rec("1", "a", "blue", 0)
	again.Detail = "rewritten"
	require.NoError(t, m.PutAudits(ctx, []audit.Record{again}, time.Hour))

	ids := func(q audit.Query) []string {
		recs, err := m.ListAudit(ctx, q)
		require.NoError(t, err)
		var out []string
		for _, r := range recs {
			out = append(out, r.ID+r.Detail)
		}
		return out
	}
	cases := []struct {
		name string
		q    audit.Query
		want []string
	}{
		{name: "a subject's records, newest first", q: audit.Query{Subject: "a", Limit: 10}, want: []string{"3", "1rewritten"}},
		{name: "a team's records, whatever the subject", q: audit.Query{Team: "blue", Limit: 10}, want: []string{"3", "2", "1rewritten"}},
		{name: "since leaves out older records", q: audit.Query{Team: "blue", Since: at.Add(time.Second), Limit: 10}, want: []string{"3", "2"}},
		{name: "limit keeps the newest", q: audit.Query{Team: "blue", Limit: 1}, want: []string{"3"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, c.want, ids(c.q))
		})
	}
	_, err := m.ListAudit(ctx, audit.Query{Limit: 1})
	require.ErrorIs(t, err, audit.ErrInvalid, "neither subject nor team")
}
