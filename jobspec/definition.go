package jobspec

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// Definition is one record of sundial.jobs, decoded.
type Definition struct {
	// Key is the record key, the job id the record is about.
	Key string
	// Encoding is the encoding of the value, and of the status that answers
	// it. Protobuf when the content-type header is missing or unreadable.
	Encoding sundialv1.Encoding
	// Kind is the sundial-kind header: sundialv1.KindJob (also when the
	// header is absent) or sundialv1.KindDag.
	Kind string
	// Spec is the definition; nil for a tombstone or a record that did not
	// decode.
	Spec *sundialv1.JobSpec
	// Tombstone is set for a record without a value: a delete.
	Tombstone bool
}

// DecodeDefinition reads a record of sundial.jobs: its key, its content-type
// and sundial-kind headers and its value. It returns every problem of the
// record as FieldErrors: the key ("key"), the headers ("content_type",
// "record"), the value ("record" when it does not decode), a definition
// whose id is not the key ("id"), and every bad value of the definition
// (Validate against limits). A tombstone needs only a valid key. A record
// of kind dag is decoded no further; the DAG engine reads it.
func DecodeDefinition(key, value []byte, headers []kgo.RecordHeader, limits Limits) (Definition, []FieldError) {
	d := Definition{Key: string(key), Kind: sundialv1.KindJob, Tombstone: value == nil}
	var errs []FieldError
	bad := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}

	var contentType string
	var contentTypeErr error
	for _, h := range headers {
		switch strings.ToLower(h.Key) {
		case sundialv1.HeaderContentType:
			contentType = string(h.Value)
			if d.Encoding, contentTypeErr = sundialv1.ParseContentType(contentType); contentTypeErr != nil {
				d.Encoding = sundialv1.EncodingProtobuf
			}
		case sundialv1.HeaderKind:
			d.Kind = string(h.Value)
		}
	}
	switch d.Kind {
	case "", sundialv1.KindJob:
		d.Kind = sundialv1.KindJob
	case sundialv1.KindDag:
		return d, nil
	default:
		bad("record", "unknown %s header %q: want %s or %s", sundialv1.HeaderKind, d.Kind, sundialv1.KindJob, sundialv1.KindDag)
	}

	if r := checkKey(key); r != "" {
		bad("key", "%s", r)
	}
	if d.Tombstone {
		return d, errs
	}
	if contentTypeErr != nil {
		bad("content_type", "%v", contentTypeErr)
		return d, errs
	}
	if len(value) == 0 {
		bad("record", "empty value: a definition needs a JobSpec, and a delete needs no value at all (a tombstone), not an empty one")
		return d, errs
	}
	spec := &sundialv1.JobSpec{}
	if err := d.Encoding.Unmarshal(value, spec); err != nil {
		bad("record", "%v", err)
		return d, errs
	}
	d.Spec = spec
	if spec.GetId() != "" && spec.GetId() != d.Key {
		bad("id", "%q differs from the record key %q: the key must be the job id", spec.GetId(), d.Key)
	}
	for _, fe := range limits.ValidateSpec(spec) {
		if fe.Field == "id" && len(errs) > 0 && errs[len(errs)-1].Field == "id" {
			continue
		}
		errs = append(errs, fe)
	}
	return d, errs
}

func checkKey(key []byte) string {
	switch {
	case key == nil:
		return "missing: the record key must be the job id"
	case !utf8.Valid(key):
		return "not valid UTF-8"
	}
	if r := CheckID(string(key)); r != "" {
		return "not a job id: " + r
	}
	return ""
}
