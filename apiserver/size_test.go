package apiserver_test

import (
	"fmt"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/sundialhq/sundial/auth"
	apiv1 "github.com/sundialhq/sundial/proto/sundial/api/v1"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// testOversizedSpecIsRefusedAtTheDoor: a definition whose parts are each
// within their bounds but whose whole is about 1 MB (the findings' 999,800
// bytes) would make run records Kafka refuses; ApplyJob rejects it before
// producing, naming the field record, the size and the limit, and stores nothing.
func testOversizedSpecIsRefusedAtTheDoor(t *testing.T, e *env, owner, _ string) {
	ctx := t.Context()
	spec := cronJob(owner+".oversized", owner)
	spec.Payload = make([]byte, 256<<10)
	headers := map[string]string{}
	for i := range 59 {
		headers[fmt.Sprintf("X-Pad-%02d-%s", i, strings.Repeat("h", 3980))] = strings.Repeat("v", 4000)
	}
	spec.Target = &sundialv1.Target{Kind: &sundialv1.Target_Http{Http: &sundialv1.HttpTarget{
		Url: "http://127.0.0.1:1/oversized", Body: make([]byte, 256<<10), Headers: headers,
	}}}
	require.Greater(t, proto.Size(spec), 990_000)

	res, err := e.jobs(token(owner, auth.RoleAdmin)).ApplyJob(ctx, connect.NewRequest(&apiv1.ApplyJobRequest{Spec: spec}))
	require.NoError(t, err)
	require.False(t, res.Msg.GetAccepted())
	errs := res.Msg.GetStatus().GetErrors()
	require.Len(t, errs, 1, "%v", errs)
	assert.Equal(t, "record", errs[0].GetField())
	assert.Contains(t, errs[0].GetReason(), fmt.Sprint(proto.Size(spec)))
	assert.Contains(t, errs[0].GetReason(), "524288")

	_, err = e.jobs(token(owner, auth.RoleAdmin)).GetJob(ctx, connect.NewRequest(&apiv1.GetJobRequest{Id: spec.GetId()}))
	requireCode(t, connect.CodeNotFound, err, "stored nothing")
}
