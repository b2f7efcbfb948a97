package audit_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/audit"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// Every diff the trail keeps (a creation, a change, a deletion, of a job or
// of a DAG's inline job) says that a secret changed and never what it was
// or became.
func TestDiffNeverHoldsSecrets(t *testing.T) {
	t.Parallel()
	target := func(auth, key string) *sundialv1.Target {
		return &sundialv1.Target{Kind: &sundialv1.Target_Http{Http: &sundialv1.HttpTarget{
			Url: "https://h.example/?apikey=" + key, Headers: map[string]string{"Authorization": auth},
		}}}
	}
	job := func(auth, key string) *sundialv1.JobSpec {
		return &sundialv1.JobSpec{Id: "t.j", OwnerTeam: "t", Target: target(auth, key)}
	}
	dag := func(auth, key string) *sundialv1.DagSpec {
		return &sundialv1.DagSpec{Id: "t.d", Nodes: []*sundialv1.DagNode{{Id: "n", Job: &sundialv1.DagNode_Inline{Inline: &sundialv1.JobSpec{Target: target(auth, key)}}}}}
	}
	secrets := []string{"OLD-AUTH", "NEW-AUTH", "OLD-KEY", "NEW-KEY"}
	for _, tc := range []struct {
		name          string
		before, after proto.Message
		changed       bool
	}{
		{"a job created", nil, job("NEW-AUTH", "NEW-KEY"), false},
		{"a job's secrets changed", job("OLD-AUTH", "OLD-KEY"), job("NEW-AUTH", "NEW-KEY"), true},
		{"a job deleted", job("OLD-AUTH", "OLD-KEY"), nil, false},
		{"a DAG's inline job's secrets changed", dag("OLD-AUTH", "OLD-KEY"), dag("NEW-AUTH", "NEW-KEY"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var keep []proto.Message
			for _, m := range []proto.Message{tc.before, tc.after} {
				if m != nil {
					keep = append(keep, proto.Clone(m))
				}
			}
			changes := audit.Diff(tc.before, tc.after)
			require.NotEmpty(t, changes)
			text := fmt.Sprintf("%+v", changes)
			for _, s := range secrets {
				assert.NotContains(t, text, s)
			}
			if tc.changed {
				assert.Contains(t, text, "<redacted changed>")
			}
			i := 0
			for _, m := range []proto.Message{tc.before, tc.after} {
				if m != nil {
					assert.True(t, proto.Equal(keep[i], m), "Diff leaves its arguments as they were")
					i++
				}
			}
		})
	}
}

// A row kept before diffs were redacted (or a change a caller built
// itself) is redacted as it is read or published; a diff already redacted
// comes out as it was.
func TestRecordedChangesLoseTheirSecrets(t *testing.T) {
	t.Parallel()
	old := []audit.Change{
		{Field: "target.http.headers", Before: `{Authorization: "Bearer OLD-AUTH", Content-Type: "application/json"}`, After: `{Authorization: "Bearer NEW-AUTH", Content-Type: "application/json"}`},
		{Field: "target.http.url", Before: `"https://h.example/?apikey=OLD-KEY&page=1"`, After: `"https://h.example/?apikey=NEW-KEY&page=1"`},
		{Field: "target", After: `{"http":{"url":"https://h.example/?token=NEW-KEY","headers":{"X-Api-Key":"NEW-AUTH"}}}`},
		{Field: "target.http", Before: `{"url":"https://h.example/","headers":{"Cookie":"OLD-AUTH` + "…"},
		{Field: "description", Before: `"old"`, After: `"new"`},
	}
	rec := audit.Record{ID: "x", Subject: "t.j", Changes: old}
	kr, err := audit.KafkaRecord("sundial.audit", rec)
	require.NoError(t, err)
	var got audit.Record
	require.NoError(t, json.Unmarshal(kr.Value, &got))
	text := fmt.Sprintf("%+v", got.Changes)
	for _, s := range []string{"OLD-AUTH", "NEW-AUTH", "OLD-KEY", "NEW-KEY"} {
		assert.NotContains(t, text, s)
	}
	assert.Equal(t, []audit.Change{
		{Field: "target.http.headers", Before: `{Authorization: "<redacted>", Content-Type: "application/json"}`, After: `{Authorization: "<redacted>", Content-Type: "application/json"}`},
		{Field: "target.http.url", Before: `"https://h.example/?apikey=<redacted>&page=1"`, After: `"https://h.example/?apikey=<redacted>&page=1"`},
		{Field: "target", After: `{"http":{"url":"https://h.example/?token=<redacted>","headers":{"X-Api-Key":"<redacted>"}}}`},
		{Field: "target.http", Before: "<redacted>"},
		{Field: "description", Before: `"old"`, After: `"new"`},
	}, got.Changes)
	assert.Equal(t, old[0].Before, rec.Changes[0].Before, "the caller's record is left as it was")

	fresh := audit.Diff(
		&sundialv1.JobSpec{Id: "t.j", Target: &sundialv1.Target{Kind: &sundialv1.Target_Http{Http: &sundialv1.HttpTarget{Url: "https://h.example/?apikey=A", Headers: map[string]string{"Authorization": "X"}}}}},
		&sundialv1.JobSpec{Id: "t.j", Target: &sundialv1.Target{Kind: &sundialv1.Target_Http{Http: &sundialv1.HttpTarget{Url: "https://h.example/?apikey=B", Headers: map[string]string{"Authorization": "Y"}}}}},
	)
	kr, err = audit.KafkaRecord("sundial.audit", audit.Record{ID: "y", Subject: "t.j", Changes: fresh})
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(kr.Value, &got))
	assert.Equal(t, fresh, got.Changes, "a redacted diff, with its changed markers, is kept as it is")
}
