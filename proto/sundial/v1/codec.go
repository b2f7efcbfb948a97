package sundialv1

import (
	"bytes"
	"errors"
	"fmt"
	"mime"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Kafka record headers and their values used on Sundial's topics.
const (
	// HeaderContentType names the encoding of a record's value.
	HeaderContentType = "content-type"
	// ContentTypeProtobuf is binary protobuf, the encoding of a record
	// without a content-type header.
	ContentTypeProtobuf = "application/x-protobuf"
	// ContentTypeJSON is the protobuf JSON mapping (protojson).
	ContentTypeJSON = "application/json"

	// HeaderKind names the message of a record on a topic that carries more
	// than one: sundial.jobs (absent or KindJob: JobSpec; KindDag: DagSpec)
	// and sundial.events (absent or KindRunEvent: RunEvent; KindDagRunEvent:
	// DagRunEvent).
	HeaderKind = "sundial-kind"
	// KindJob marks a JobSpec on sundial.jobs.
	KindJob = "job"
	// KindDag marks a DagSpec on sundial.jobs.
	KindDag = "dag"
	// KindRunEvent marks a RunEvent on sundial.events.
	KindRunEvent = "run_event"
	// KindDagRunEvent marks a DagRunEvent on sundial.events.
	KindDagRunEvent = "dag_run_event"

	// HeaderDagRun is on every RunEvent a current writer puts on
	// sundial.events: the event's dag_run_id, empty for a run outside any
	// DAG. It lets a reader that wants only the events of DAG node runs
	// (the DAG engine) pass the others by without decoding them. A record
	// without it predates it and has to be decoded to tell.
	HeaderDagRun = "sundial-dag-run"

	// HeaderIdempotencyKey carries the run id on records a KafkaTarget
	// produces. HTTP targets send it as "Idempotency-Key".
	HeaderIdempotencyKey = "idempotency-key"
)

// ProtobufContentType is the content-type header value of a record whose
// value is m in binary protobuf: the media type with the message's full
// name as a parameter ("application/x-protobuf;
// messageType=sundial.v1.RunEvent"), so that a person or a tool reading the
// topic knows what to decode without knowing the topic. ParseContentType
// reads it as protobuf.
func ProtobufContentType(m proto.Message) string {
	return ContentTypeProtobuf + "; messageType=" + string(m.ProtoReflect().Descriptor().FullName())
}

// MessageType reads the messageType parameter of a content-type header
// value; "" when there is none or the value does not parse.
func MessageType(contentType string) string {
	if _, name, ok := writtenContentType(contentType); ok {
		return name
	}
	_, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return ""
	}
	// ParseMediaType lower-cases parameter names.
	return params["messagetype"]
}

// writtenContentType reads a content-type header value of exactly the form
// ContentType writes ("application/x-protobuf; messageType=sundial.v1.Run"),
// with ok false for any other form. It answers what mime.ParseMediaType
// would for those values without its allocations: every record Sundial
// reads carries one, and parsing them was 3% of a runner's CPU.
func writtenContentType(value string) (enc Encoding, messageType string, ok bool) {
	const param = "; messageType="
	switch {
	case strings.HasPrefix(value, ContentTypeProtobuf+param):
		enc, messageType = EncodingProtobuf, value[len(ContentTypeProtobuf+param):]
	case strings.HasPrefix(value, ContentTypeJSON+param):
		enc, messageType = EncodingJSON, value[len(ContentTypeJSON+param):]
	default:
		return 0, "", false
	}
	if messageType == "" {
		return 0, "", false
	}
	for _, c := range messageType {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '.' && c != '_' {
			return 0, "", false
		}
	}
	return enc, messageType, true
}

// ErrContentType reports a content-type header value that names neither
// encoding.
var ErrContentType = errors.New("unsupported content type")

// Encoding is how a record's value is encoded.
type Encoding int

// The encodings. The zero value is protobuf, the encoding of a record without
// a content-type header.
const (
	EncodingProtobuf Encoding = iota
	EncodingJSON
)

// ContentType is the content-type header value of a record whose value is
// m encoded as e, with the message's full name as a parameter
// ("application/json; messageType=sundial.v1.RunEvent"), which
// ParseContentType reads as e and MessageType as the message.
func (e Encoding) ContentType(m proto.Message) string {
	if e == EncodingJSON {
		return ContentTypeJSON + "; messageType=" + string(m.ProtoReflect().Descriptor().FullName())
	}
	return ProtobufContentType(m)
}

// ParseEncoding reads the name of an encoding as a flag gives it:
// "protobuf" (or "") or "json".
func ParseEncoding(name string) (Encoding, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "", "protobuf", "proto":
		return EncodingProtobuf, nil
	case "json":
		return EncodingJSON, nil
	}
	return 0, fmt.Errorf("encoding %q: want protobuf or json", name)
}

// String returns the content-type header value of e.
func (e Encoding) String() string {
	if e == EncodingJSON {
		return ContentTypeJSON
	}
	return ContentTypeProtobuf
}

// ParseContentType reads a content-type header value. An empty value means
// protobuf. The media type is matched ignoring case and parameters
// ("application/json; charset=utf-8" is JSON); "application/protobuf" is
// accepted as a synonym of "application/x-protobuf". Anything else is an
// error wrapping ErrContentType.
func ParseContentType(value string) (Encoding, error) {
	if strings.TrimSpace(value) == "" {
		return EncodingProtobuf, nil
	}
	if enc, _, ok := writtenContentType(value); ok {
		return enc, nil
	}
	media, _, err := mime.ParseMediaType(value)
	if err != nil {
		return 0, fmt.Errorf("%w %q: %w", ErrContentType, value, err)
	}
	switch media { // ParseMediaType lower-cases the media type
	case ContentTypeProtobuf, "application/protobuf":
		return EncodingProtobuf, nil
	case ContentTypeJSON:
		return EncodingJSON, nil
	}
	return 0, fmt.Errorf("%w %q: want %s or %s", ErrContentType, value, ContentTypeProtobuf, ContentTypeJSON)
}

// Unmarshal decodes a record value into m in the encoding its content-type
// header value names (see ParseContentType). JSON is decoded strictly: an
// unknown field is an error, so a misspelled field name is reported instead
// of silently taking its default.
func Unmarshal(contentType string, data []byte, m proto.Message) error {
	enc, err := ParseContentType(contentType)
	if err != nil {
		return err
	}
	return enc.Unmarshal(data, m)
}

// Decode decodes a record value that Sundial wrote (an event, a status)
// into m in the encoding its content-type header value names. Unlike
// Unmarshal, a JSON field m does not know is skipped, as binary protobuf
// skips an unknown field: a reader older than the writer reads what it
// knows.
func Decode(contentType string, data []byte, m proto.Message) error {
	enc, err := ParseContentType(contentType)
	if err != nil {
		return err
	}
	if enc == EncodingJSON {
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(data, m); err != nil {
			return fmt.Errorf("decode %s as JSON: %w", m.ProtoReflect().Descriptor().Name(), err)
		}
		return nil
	}
	return enc.Unmarshal(data, m)
}

// Unmarshal decodes data, encoded as e, into m.
func (e Encoding) Unmarshal(data []byte, m proto.Message) error {
	if e == EncodingJSON {
		if err := (protojson.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(data, m); err != nil {
			return fmt.Errorf("decode %s as JSON: %w", m.ProtoReflect().Descriptor().Name(), err)
		}
		return nil
	}
	if err := proto.Unmarshal(data, m); err != nil {
		hint := ""
		if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
			hint = " (the value looks like JSON: set the record header " + HeaderContentType + ": " + ContentTypeJSON + ")"
		}
		return fmt.Errorf("decode %s as protobuf%s: %w", m.ProtoReflect().Descriptor().Name(), hint, err)
	}
	return nil
}

// Marshal encodes m as e: deterministic binary protobuf, or indented JSON
// with protobuf field names as the JSON mapping prescribes (lowerCamelCase).
// The registry answers a definition in the encoding it arrived in.
func (e Encoding) Marshal(m proto.Message) ([]byte, error) {
	var (
		data []byte
		err  error
	)
	if e == EncodingJSON {
		data, err = protojson.MarshalOptions{Multiline: true}.Marshal(m)
	} else {
		data, err = proto.MarshalOptions{Deterministic: true}.Marshal(m)
	}
	if err != nil {
		return nil, fmt.Errorf("encode %s as %s: %w", m.ProtoReflect().Descriptor().Name(), e, err)
	}
	return data, nil
}
