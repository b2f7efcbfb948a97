package topics

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/twmb/franz-go/pkg/kgo"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

func headerMap(hs []kgo.RecordHeader) map[string]string {
	m := map[string]string{}
	for _, h := range hs {
		m[h.Key] = string(h.Value)
	}
	return m
}

func TestEventHeaders(t *testing.T) {
	t.Parallel()
	assert.Equal(t, map[string]string{
		"content-type":    "application/x-protobuf; messageType=sundial.v1.RunEvent",
		"sundial-kind":    "run_event",
		"sundial-dag-run": "",
	}, headerMap(EventHeaders(&sundialv1.RunEvent{})))
	assert.Equal(t, map[string]string{
		"content-type":    "application/x-protobuf; messageType=sundial.v1.RunEvent",
		"sundial-kind":    "run_event",
		"sundial-dag-run": "dag@1",
	}, headerMap(EventHeaders(&sundialv1.RunEvent{DagRunId: "dag@1"})))
	assert.Equal(t, map[string]string{
		"content-type": "application/x-protobuf; messageType=sundial.v1.DagRunEvent",
		"sundial-kind": "dag_run_event",
	}, headerMap(EventHeaders(&sundialv1.DagRunEvent{})))
	assert.Equal(t, map[string]string{"content-type": "application/x-protobuf; messageType=sundial.v1.Run"},
		headerMap(ProtobufHeaders(&sundialv1.Run{})))
}
