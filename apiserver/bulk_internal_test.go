package apiserver

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sundialhq/sundial/auth"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
)

func TestBulkApplies(t *testing.T) {
	t.Parallel()
	op := auth.Principal{Subject: "token:op", Team: "pay", Role: auth.RoleOperator}
	viewer := auth.Principal{Subject: "token:v", Team: "pay", Role: auth.RoleViewer}
	admin := auth.Principal{Subject: "token:a", ClusterAdmin: true}
	active, paused := bulkMatch{id: "pay.a", team: "pay"}, bulkMatch{id: "pay.b", team: "pay", paused: true}
	pause, resume, trigger := apiv1.BulkAction_BULK_ACTION_PAUSE, apiv1.BulkAction_BULK_ACTION_RESUME, apiv1.BulkAction_BULK_ACTION_TRIGGER
	for _, c := range []struct {
		name    string
		p       auth.Principal
		action  apiv1.BulkAction
		job     bulkMatch
		touched bool
		skipped string
	}{
		{"pause an active job", op, pause, active, true, ""},
		{"pause a paused job", op, pause, paused, false, "already paused"},
		{"resume a paused job", op, resume, paused, true, ""},
		{"resume an active job", op, resume, active, false, "not paused"},
		{"trigger either", op, trigger, paused, true, ""},
		{"a viewer touches nothing", viewer, trigger, active, false, `needs the operator role in team "pay"`},
		{"the cluster admin, any team", admin, pause, bulkMatch{id: "ops.c", team: "ops"}, true, ""},
	} {
		touched, skipped := bulkApplies(c.p, c.action, c.job)
		assert.Equal(t, c.touched, touched, c.name)
		assert.Equal(t, c.skipped, skipped, c.name)
	}
}

func TestCheckBulk(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		req  *apiv1.BulkJobsRequest
		want []string
	}{
		{"fine", &apiv1.BulkJobsRequest{Action: apiv1.BulkAction_BULK_ACTION_PAUSE, Text: "nightly"}, nil},
		{"a filter is enough", &apiv1.BulkJobsRequest{Action: apiv1.BulkAction_BULK_ACTION_RESUME, Filter: &apiv1.DefinitionFilter{Team: "pay"}}, nil},
		{"no action, no selection", &apiv1.BulkJobsRequest{}, []string{"action BULK_ACTION_UNSPECIFIED: must be pause, resume or trigger", "filter, text: at least one is required"}},
	} {
		err := checkBulk(c.req)
		if c.want == nil {
			assert.NoError(t, err, c.name)
			continue
		}
		for _, w := range c.want {
			assert.ErrorContains(t, err, w, c.name)
		}
	}
}
