package topics

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

func TestDecodeRunEvent(t *testing.T) {
	t.Parallel()
	ev := &sundialv1.RunEvent{RunId: "job@1000", JobId: "job", Attempt: 1, State: sundialv1.RunState_RUN_STATE_STARTED}
	bin, err := proto.Marshal(ev)
	require.NoError(t, err)
	js, err := protojson.Marshal(ev)
	require.NoError(t, err)
	dag := &sundialv1.DagRunEvent{DagRunId: "dag@1"}
	dagBin, err := proto.Marshal(dag)
	require.NoError(t, err)
	hdr := func(kv ...string) []kgo.RecordHeader {
		var h []kgo.RecordHeader
		for i := 0; i < len(kv); i += 2 {
			h = append(h, kgo.RecordHeader{Key: kv[i], Value: []byte(kv[i+1])})
		}
		return h
	}
	for _, tc := range []struct {
		name    string
		rec     *kgo.Record
		ok, bad bool
	}{
		{"as produced", &kgo.Record{Value: bin, Headers: EventHeaders(ev)}, true, false},
		{"no headers: binary protobuf", &kgo.Record{Value: bin}, true, false},
		{"JSON, kind run_event", &kgo.Record{Value: js, Headers: hdr("Content-Type", sundialv1.ContentTypeJSON, sundialv1.HeaderKind, sundialv1.KindRunEvent)}, true, false},
		{"a DAG run event as produced", &kgo.Record{Value: dagBin, Headers: EventHeaders(dag)}, false, false},
		{"a DAG run event by its kind alone", &kgo.Record{Value: dagBin, Headers: hdr(sundialv1.HeaderKind, sundialv1.KindDagRunEvent)}, false, false},
		{"the message type decides over the kind", &kgo.Record{Value: bin, Headers: hdr(sundialv1.HeaderContentType, sundialv1.ProtobufContentType(ev), sundialv1.HeaderKind, sundialv1.KindDagRunEvent)}, true, false},
		{"a run event that does not decode", &kgo.Record{Value: []byte("{not json"), Headers: hdr(sundialv1.HeaderContentType, sundialv1.ContentTypeJSON)}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := DecodeRunEvent(tc.rec)
			assert.Equal(t, tc.ok, ok)
			if tc.bad {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			if tc.ok {
				assert.True(t, proto.Equal(ev, got), "got %v", got)
			} else {
				assert.Nil(t, got)
			}
		})
	}
}

// TestEncodeEventEitherEncoding: an event written as JSON (for kcat
// readers) says so in its content-type, keeps its kind, and every reader
// decodes it to the same event as its protobuf twin; a JSON field the
// reader does not know (a newer writer's) is skipped as protobuf skips one.
func TestEncodeEventEitherEncoding(t *testing.T) {
	t.Parallel()
	ev := &sundialv1.RunEvent{RunId: "job@1000", JobId: "job", Attempt: 2, State: sundialv1.RunState_RUN_STATE_SUCCEEDED, TraceId: "4bf92f3577b34da6a3ce929d0e0e4736"}
	for _, tc := range []struct {
		enc         sundialv1.Encoding
		contentType string
	}{
		{sundialv1.EncodingProtobuf, "application/x-protobuf; messageType=sundial.v1.RunEvent"},
		{sundialv1.EncodingJSON, "application/json; messageType=sundial.v1.RunEvent"},
	} {
		t.Run(tc.enc.String(), func(t *testing.T) {
			t.Parallel()
			value, headers, err := EncodeEvent(tc.enc, ev)
			require.NoError(t, err)
			rec := &kgo.Record{Value: value, Headers: headers}
			assert.Equal(t, tc.contentType, Header(rec, sundialv1.HeaderContentType))
			assert.Equal(t, sundialv1.KindRunEvent, Header(rec, sundialv1.HeaderKind))
			got, ok, err := DecodeRunEvent(rec)
			require.NoError(t, err)
			require.True(t, ok)
			assert.True(t, proto.Equal(ev, got), "got %v", got)
		})
	}

	dag := &sundialv1.DagRunEvent{DagRunId: "dag@1"}
	value, headers, err := EncodeEvent(sundialv1.EncodingJSON, dag)
	require.NoError(t, err)
	_, ok, err := DecodeRunEvent(&kgo.Record{Value: value, Headers: headers})
	require.NoError(t, err)
	assert.False(t, ok, "a DAG run event in JSON is no run event")

	newer := []byte(`{"runId": "job@1000", "jobId": "job", "fieldOfALaterRelease": 1}`)
	got, ok, err := DecodeRunEvent(&kgo.Record{Value: newer, Headers: []kgo.RecordHeader{{Key: sundialv1.HeaderContentType, Value: []byte(sundialv1.ContentTypeJSON)}}})
	require.NoError(t, err, "an unknown JSON field of a newer writer is skipped")
	require.True(t, ok)
	assert.Equal(t, "job@1000", got.GetRunId())
}

// TestDagRunOf: the DAG run header is read without decoding, and a record
// without it (written before the header existed) is not marked, so a
// reader decodes it; during an upgrade both kinds share the topic.
func TestDagRunOf(t *testing.T) {
	t.Parallel()
	inDag := &sundialv1.RunEvent{RunId: "dag@1/a", JobId: "a", DagRunId: "dag@1", DagNodeId: "a"}
	plain := &sundialv1.RunEvent{RunId: "job@1000", JobId: "job"}
	encoded := func(enc sundialv1.Encoding, ev *sundialv1.RunEvent) *kgo.Record {
		value, headers, err := EncodeEvent(enc, ev)
		require.NoError(t, err)
		return &kgo.Record{Value: value, Headers: headers}
	}
	legacy := func(ev *sundialv1.RunEvent) *kgo.Record {
		b, err := proto.Marshal(ev)
		require.NoError(t, err)
		return &kgo.Record{Value: b, Headers: []kgo.RecordHeader{{Key: sundialv1.HeaderKind, Value: []byte(sundialv1.KindRunEvent)}}}
	}
	for _, tc := range []struct {
		name   string
		rec    *kgo.Record
		id     string
		marked bool
	}{
		{"a DAG node's event, protobuf", encoded(sundialv1.EncodingProtobuf, inDag), "dag@1", true},
		{"a DAG node's event, JSON", encoded(sundialv1.EncodingJSON, inDag), "dag@1", true},
		{"a run outside any DAG", encoded(sundialv1.EncodingProtobuf, plain), "", true},
		{"written before the header: a DAG node's event", legacy(inDag), "", false},
		{"written before the header: a run outside any DAG", legacy(plain), "", false},
		{"no headers at all", &kgo.Record{Value: []byte{}}, "", false},
		{"a DAG run event", &kgo.Record{Headers: EventHeaders(&sundialv1.DagRunEvent{DagRunId: "dag@1"})}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, marked := DagRunOf(tc.rec)
			assert.Equal(t, tc.id, id)
			assert.Equal(t, tc.marked, marked)
		})
	}
}
