package jobspec

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// Bounds of a trigger.
const (
	// MaxIdempotencyKeyLength bounds Trigger.idempotency_key.
	MaxIdempotencyKeyLength = 200
	// MaxCallerLength bounds Trigger.caller.
	MaxCallerLength = 200
	// MaxFutureSkew is how far requested_at may lie after the record's
	// timestamp (clock skew between caller and broker). A trigger asks for
	// a run now; a later run is a one-off job.
	MaxFutureSkew = time.Minute
)

// TriggerRecord is a record of sundial.triggers, read and checked.
type TriggerRecord struct {
	// Trigger is the decoded value; nil when it did not decode.
	Trigger *sundialv1.Trigger
	// JobID is the record key.
	JobID string
	// Due is the run's due time: requested_at, or the record's timestamp,
	// at millisecond precision.
	Due time.Time
}

// DecodeTrigger reads a record of sundial.triggers and reports every bad
// value as FieldErrors ("job_id", "idempotency_key", "requested_at",
// "payload", "caller", or "key", "content_type", "record" for the record).
func DecodeTrigger(rec *kgo.Record, maxPayload int) (TriggerRecord, []FieldError) {
	d := TriggerRecord{JobID: string(rec.Key), Due: millis(rec.Timestamp)}
	var errs []FieldError
	bad := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if !utf8.Valid(rec.Key) {
		bad("key", "not valid UTF-8")
	} else if r := CheckID(d.JobID); r != "" {
		bad("key", "not a job id: %s", r)
	}
	var contentType string
	for _, h := range rec.Headers {
		if strings.EqualFold(h.Key, sundialv1.HeaderContentType) {
			contentType = string(h.Value)
		}
	}
	enc, err := sundialv1.ParseContentType(contentType)
	switch {
	case err != nil:
		bad("content_type", "%v", err)
		return d, errs
	case len(rec.Value) == 0:
		bad("record", "no value: a trigger needs a Trigger message")
		return d, errs
	}
	t := &sundialv1.Trigger{}
	if err := enc.Unmarshal(rec.Value, t); err != nil {
		bad("record", "%v", err)
		return d, errs
	}
	d.Trigger = t
	if t.GetJobId() == "" {
		bad("job_id", "required")
	} else if t.GetJobId() != d.JobID {
		bad("job_id", "%q differs from the record key %q: the key must be the job id", t.GetJobId(), d.JobID)
	}
	switch k := t.GetIdempotencyKey(); {
	case k == "":
		bad("idempotency_key", "required: a key unique per request, so that a resent trigger runs once")
	case len(k) > MaxIdempotencyKeyLength:
		bad("idempotency_key", "%d characters, at most %d allowed", len(k), MaxIdempotencyKeyLength)
	}
	if ts := t.GetRequestedAt(); ts != nil {
		if err := ts.CheckValid(); err != nil {
			bad("requested_at", "invalid timestamp: %v", err)
		} else if at := ts.AsTime(); at.After(rec.Timestamp.Add(MaxFutureSkew)) {
			bad("requested_at", "%s is after the record's timestamp %s: a trigger runs now; schedule a later run as a job with an at schedule",
				at.Format(time.RFC3339Nano), rec.Timestamp.UTC().Format(time.RFC3339Nano))
		} else {
			d.Due = millis(at)
		}
	}
	if n := len(t.GetPayload()); n > maxPayload {
		bad("payload", "%d bytes, at most %d allowed", n, maxPayload)
	}
	if n := len(t.GetCaller()); n > MaxCallerLength {
		bad("caller", "%d characters, at most %d allowed", n, MaxCallerLength)
	}
	return d, errs
}

// millis returns t in UTC at the millisecond precision of due times and run
// ids; the zero time stays zero.
func millis(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Truncate(time.Millisecond)
}
