package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/protobuf/proto"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

func TestMigrateReportsLegacyIDs(t *testing.T) {
	t.Parallel()
	job := func(id, team string) store.Job {
		b, err := proto.Marshal(&sundialv1.JobSpec{Id: id, OwnerTeam: team})
		assert.NoError(t, err)
		return store.Job{ID: id, Spec: b}
	}
	tests := []struct {
		name string
		job  store.Job
		want []string // substrings, one per line
	}{
		{"a namespaced job is not reported", job("billing.sync", "billing"), nil},
		{"an inline-shaped id is reported", job("b.dag/n", "b"), []string{`contains "/"`}},
		{"an owner team that is no team name is reported", job("Pay.x", "Pay"), []string{"owner_team: team \"Pay\""}},
		{"an undecodable spec is reported", store.Job{ID: "x", Spec: []byte{0xff}}, []string{"does not decode"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := legacyProblems(tt.job)
			assert.Len(t, got, len(tt.want), "%q", got)
			for i := range min(len(got), len(tt.want)) {
				assert.Contains(t, got[i], tt.want[i])
			}
		})
	}
}
