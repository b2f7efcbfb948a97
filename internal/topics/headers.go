package topics

import (
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// ProtobufHeaders are the headers of a record Sundial produces with m in
// binary protobuf as its value: the content-type, with the message type
// (sundialv1.ProtobufContentType).
func ProtobufHeaders(m proto.Message) []kgo.RecordHeader {
	return []kgo.RecordHeader{{Key: sundialv1.HeaderContentType, Value: []byte(sundialv1.ProtobufContentType(m))}}
}

// EventHeaders are the headers of a record on sundial.events: the
// content-type, the kind that tells a RunEvent from a DagRunEvent to
// readers that predate the message type in the content-type, and on a
// RunEvent its DAG run (sundialv1.HeaderDagRun, empty outside any DAG; see
// DagRunOf). Every event record gets its headers here.
func EventHeaders(ev proto.Message) []kgo.RecordHeader {
	return eventHeaders(sundialv1.EncodingProtobuf, ev)
}

// EncodeEvent encodes ev, a RunEvent or a DagRunEvent, as enc for
// sundial.events, and returns the record's value and headers: the
// content-type names the encoding and the message type, so every reader
// (DecodeRunEvent) decodes either. JSON is the protobuf JSON mapping, for
// people and tools reading the topic (docs/observability.md).
func EncodeEvent(enc sundialv1.Encoding, ev proto.Message) ([]byte, []kgo.RecordHeader, error) {
	value, err := enc.Marshal(ev)
	if err != nil {
		return nil, nil, err
	}
	return value, eventHeaders(enc, ev), nil
}

func eventHeaders(enc sundialv1.Encoding, ev proto.Message) []kgo.RecordHeader {
	h := []kgo.RecordHeader{{Key: sundialv1.HeaderContentType, Value: []byte(enc.ContentType(ev))}}
	switch ev := ev.(type) {
	case *sundialv1.RunEvent:
		h = append(h,
			kgo.RecordHeader{Key: sundialv1.HeaderKind, Value: []byte(sundialv1.KindRunEvent)},
			kgo.RecordHeader{Key: sundialv1.HeaderDagRun, Value: []byte(ev.GetDagRunId())})
	case *sundialv1.DagRunEvent:
		h = append(h, kgo.RecordHeader{Key: sundialv1.HeaderKind, Value: []byte(sundialv1.KindDagRunEvent)})
	}
	return h
}
