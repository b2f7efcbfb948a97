package apiserver_test

import (
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/auth"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	"github.com/sundialhq/sundial/proto/sundial/api/v1/apiv1connect"
)

// testBulk: BulkJobs previews and acts on the same selection, only on the
// caller's team's jobs, and refuses a count that changed.
func testBulk(t *testing.T, e *env, owner, other string) {
	ctx := t.Context()
	ids := []string{owner + ".bulk-a", owner + ".bulk-b", owner + ".bulk-c"}
	for _, id := range ids {
		apply(t, e, token(owner, auth.RoleAdmin), cronJob(id, owner))
	}
	// Another team's job the same search would find: never listed.
	apply(t, e, token(other, auth.RoleAdmin), cronJob(other+".bulk-x", other))
	op, viewer := e.operator(token(owner, auth.RoleOperator)), e.operator(token(owner, auth.RoleViewer))
	bulk := func(c apiv1connect.OperatorServiceClient, action apiv1.BulkAction, dry bool, expected uint32) (*apiv1.BulkJobsResponse, error) {
		res, err := c.BulkJobs(ctx, connect.NewRequest(&apiv1.BulkJobsRequest{Action: action, Text: ".bulk-", DryRun: dry, ExpectedCount: expected}))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	}
	listed := func(r *apiv1.BulkJobsResponse) (touched, skipped []string) {
		for _, j := range r.GetJobs() {
			if j.GetTouched() {
				touched = append(touched, j.GetJobId())
			} else {
				skipped = append(skipped, j.GetJobId()+": "+j.GetSkipped())
			}
		}
		return touched, skipped
	}
	paused := func() []bool {
		var out []bool
		for _, id := range ids {
			got, err := e.jobs(token(owner, auth.RoleViewer)).GetJob(ctx, connect.NewRequest(&apiv1.GetJobRequest{Id: id}))
			require.NoError(t, err)
			out = append(out, got.Msg.GetJob().GetSpec().GetPaused())
		}
		return out
	}

	_, err := op.BulkJobs(ctx, connect.NewRequest(&apiv1.BulkJobsRequest{Action: apiv1.BulkAction_BULK_ACTION_PAUSE}))
	requireCode(t, connect.CodeInvalidArgument, err, "no selection")

	preview, err := bulk(viewer, apiv1.BulkAction_BULK_ACTION_PAUSE, true, 0)
	require.NoError(t, err)
	touched, skipped := listed(preview)
	assert.Empty(t, touched, "a viewer touches nothing")
	assert.Len(t, skipped, 3)
	assert.True(t, strings.HasSuffix(skipped[0], "needs the operator role in team \""+owner+"\""), skipped[0])

	preview, err = bulk(op, apiv1.BulkAction_BULK_ACTION_PAUSE, true, 0)
	require.NoError(t, err)
	touched, _ = listed(preview)
	assert.ElementsMatch(t, ids, touched, "the preview: the owner's jobs only")
	assert.EqualValues(t, 3, preview.GetTouched())
	assert.Equal(t, []bool{false, false, false}, paused(), "a dry run changes nothing")

	_, err = bulk(op, apiv1.BulkAction_BULK_ACTION_PAUSE, false, 2)
	requireCode(t, connect.CodeFailedPrecondition, err, "a count that is not the preview's")
	assert.Equal(t, []bool{false, false, false}, paused(), "a refused bulk changes nothing")

	done, err := bulk(op, apiv1.BulkAction_BULK_ACTION_PAUSE, false, 3)
	require.NoError(t, err)
	assert.EqualValues(t, 3, done.GetTouched())
	assert.Zero(t, done.GetFailed(), "%v", done.GetJobs())
	assert.Equal(t, []bool{true, true, true}, paused())

	again, err := bulk(op, apiv1.BulkAction_BULK_ACTION_PAUSE, true, 0)
	require.NoError(t, err)
	_, skipped = listed(again)
	assert.Len(t, skipped, 3)
	assert.True(t, strings.HasSuffix(skipped[0], ": already paused"), skipped[0])

	_, err = bulk(op, apiv1.BulkAction_BULK_ACTION_RESUME, false, 3)
	require.NoError(t, err)
	assert.Equal(t, []bool{false, false, false}, paused())

	triggered, err := bulk(op, apiv1.BulkAction_BULK_ACTION_TRIGGER, false, 3)
	require.NoError(t, err)
	for _, j := range triggered.GetJobs() {
		assert.True(t, strings.HasPrefix(j.GetRunId(), j.GetJobId()+"@"), "%s: run %q", j.GetJobId(), j.GetRunId())
	}
}
