package jobspec

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/timestamppb"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// MaxReportedErrors bounds the errors a status carries, so a definition with
// a hundred thousand bad labels still gets an answer that fits a record.
const MaxReportedErrors = 100

// StatusSource names rec in the status that answers it, which is how a
// producer finds the answer to its own record (client.WaitStatus).
func StatusSource(rec *kgo.Record) *sundialv1.RecordSource {
	return &sundialv1.RecordSource{
		Topic:     rec.Topic,
		Partition: rec.Partition,
		Offset:    rec.Offset,
		Timestamp: timestamppb.New(rec.Timestamp),
	}
}

// Reject makes st the answer to a rejected record: not accepted, outcome
// REJECTED, and errs as StatusErrors.
func Reject(st *sundialv1.JobStatus, errs []FieldError) {
	st.Accepted = false
	st.Outcome = sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_REJECTED
	st.Errors = StatusErrors(errs)
}

// StatusErrors converts errors for a status: at most MaxReportedErrors, then
// one saying how many more there were, all in valid UTF-8 (a status is a
// protobuf message; its strings must be, whatever the record carried).
func StatusErrors(errs []FieldError) []*sundialv1.FieldError {
	out := make([]*sundialv1.FieldError, 0, min(len(errs), MaxReportedErrors+1))
	for i, e := range errs {
		if i == MaxReportedErrors {
			out = append(out, &sundialv1.FieldError{Field: "record", Reason: fmt.Sprintf("%d more errors not listed", len(errs)-i)})
			break
		}
		out = append(out, &sundialv1.FieldError{Field: ValidUTF8(e.Field), Reason: ValidUTF8(e.Reason)})
	}
	return out
}

// ValidUTF8 replaces the invalid bytes of s, a record key or a reason that
// quotes one, so that it can travel in a status.
func ValidUTF8(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// StatusRecord encodes st in enc as the answer to rec on topic (the
// installation's sundial.jobs.status), keyed by rec's key. It always returns
// a record: when st does not encode in enc, the record is a protobuf status
// saying so, and err says why, for the caller to log.
func StatusRecord(topic string, rec *kgo.Record, enc sundialv1.Encoding, st *sundialv1.JobStatus) (_ *kgo.Record, err error) {
	value, err := enc.Marshal(st)
	if err != nil {
		// Strings were made valid UTF-8, so this should not happen; never
		// lose the answer over it.
		enc = sundialv1.EncodingProtobuf
		st.Errors = []*sundialv1.FieldError{{Field: "record", Reason: "the status could not be encoded"}}
		value, _ = enc.Marshal(st)
		err = fmt.Errorf("encode the status of %s[%d]@%d: %w", rec.Topic, rec.Partition, rec.Offset, err)
	}
	key := rec.Key
	if key == nil {
		key = []byte{} // a compacted topic refuses records without a key
	}
	return &kgo.Record{
		Topic:   topic,
		Key:     key,
		Value:   value,
		Headers: []kgo.RecordHeader{{Key: sundialv1.HeaderContentType, Value: []byte(enc.String())}},
	}, err
}
