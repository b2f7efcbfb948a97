package dag

import (
	"fmt"
	"unicode/utf8"

	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// Definition is one DAG record of sundial.jobs (header sundial-kind: dag),
// decoded.
type Definition struct {
	// Key is the record key, the DAG id the record is about.
	Key string
	// Encoding is the encoding of the value, and of the status answering
	// it. Protobuf when the content-type header is missing or unreadable.
	Encoding sundialv1.Encoding
	// Tombstone is set for a record without a value: a delete.
	Tombstone bool
	// Spec is the definition as decoded; nil for a tombstone or a value
	// that did not decode.
	Spec *sundialv1.DagSpec
	// Graph is the compiled definition; nil unless the record is a valid
	// definition.
	Graph *Graph
}

// Decode reads a DAG record: its key, its content-type header value and its
// value. It returns every problem as FieldErrors: the key ("key"), the
// content type ("content_type"), a value that does not decode ("record"), an
// id other than the key ("id"), and every bad value of the definition (see
// Compile). A tombstone needs only a valid key. Decode never panics, whatever
// the input.
func Decode(key, value []byte, contentType string, opts Options) (Definition, []FieldError) {
	d := Definition{Key: string(key), Tombstone: value == nil}
	var errs []FieldError
	bad := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	enc, ctErr := sundialv1.ParseContentType(contentType)
	if ctErr == nil {
		d.Encoding = enc
	}
	switch {
	case key == nil:
		bad("key", "missing: the record key must be the DAG id")
	case !utf8.Valid(key):
		bad("key", "not valid UTF-8")
	default:
		if r := jobspec.CheckID(string(key)); r != "" {
			bad("key", "not a DAG id: %s", r)
		}
	}
	if d.Tombstone {
		return d, errs
	}
	if ctErr != nil {
		bad("content_type", "%v", ctErr)
		return d, errs
	}
	if len(value) == 0 {
		bad("record", "empty value: a definition needs a DagSpec, and a delete needs no value at all (a tombstone), not an empty one")
		return d, errs
	}
	spec := &sundialv1.DagSpec{}
	if err := enc.Unmarshal(value, spec); err != nil {
		bad("record", "%v", err)
		return d, errs
	}
	d.Spec = spec
	idBad := false
	if spec.GetId() != "" && spec.GetId() != d.Key {
		bad("id", "%q differs from the record key %q: the key must be the DAG id", spec.GetId(), d.Key)
		idBad = true
	}
	g, specErrs := Compile(spec, opts)
	for _, fe := range specErrs {
		if fe.Field == "id" && idBad {
			continue
		}
		errs = append(errs, fe)
	}
	if len(errs) == 0 {
		d.Graph = g
	}
	return d, errs
}
