package sundialv1_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

func TestProtobufContentType(t *testing.T) {
	t.Parallel()
	ct := sundialv1.ProtobufContentType(&sundialv1.RunEvent{})
	assert.Equal(t, "application/x-protobuf; messageType=sundial.v1.RunEvent", ct)
	assert.Equal(t, "sundial.v1.RunEvent", sundialv1.MessageType(ct))
	enc, err := sundialv1.ParseContentType(ct)
	require.NoError(t, err)
	assert.Equal(t, sundialv1.EncodingProtobuf, enc, "readers that only know the media type still decode it")

	ev := &sundialv1.RunEvent{RunId: "j@1", JobId: "j"}
	b, err := sundialv1.EncodingProtobuf.Marshal(ev)
	require.NoError(t, err)
	back := &sundialv1.RunEvent{}
	require.NoError(t, sundialv1.Unmarshal(ct, b, back))
	assert.Equal(t, "j@1", back.GetRunId())

	assert.Empty(t, sundialv1.MessageType("application/x-protobuf"))
	assert.Empty(t, sundialv1.MessageType(""))
	assert.Empty(t, sundialv1.MessageType("not a media type;;"))
}
