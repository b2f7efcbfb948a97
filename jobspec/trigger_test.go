package jobspec_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/jobspec"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

func triggerRecord(t testing.TB, tr *sundialv1.Trigger, enc sundialv1.Encoding) *kgo.Record {
	t.Helper()
	value, err := enc.Marshal(tr)
	require.NoError(t, err)
	return &kgo.Record{
		Key: []byte(tr.GetJobId()), Value: value, Timestamp: time.Date(2026, 3, 28, 9, 12, 45, 0, time.UTC),
		Headers: []kgo.RecordHeader{{Key: sundialv1.HeaderContentType, Value: []byte(enc.String())}},
	}
}

func TestDecodeTrigger(t *testing.T) {
	t.Parallel()
	requested := time.Date(2026, 3, 28, 9, 12, 44, 318_400_000, time.UTC)
	base := func() *sundialv1.Trigger {
		return &sundialv1.Trigger{JobId: "billing.x", IdempotencyKey: "k", RequestedAt: timestamppb.New(requested)}
	}
	cases := []struct {
		name   string
		rec    func() *kgo.Record
		field  string
		reason string
	}{
		{"valid json", func() *kgo.Record { return triggerRecord(t, base(), sundialv1.EncodingJSON) }, "", ""},
		{"valid protobuf", func() *kgo.Record { return triggerRecord(t, base(), sundialv1.EncodingProtobuf) }, "", ""},
		{"key differs", func() *kgo.Record {
			r := triggerRecord(t, base(), sundialv1.EncodingJSON)
			r.Key = []byte("other")
			return r
		}, "job_id", `differs from the record key "other"`},
		{"key not an id", func() *kgo.Record {
			tr := base()
			tr.JobId = "a@b"
			return triggerRecord(t, tr, sundialv1.EncodingJSON)
		}, "key", "not a job id"},
		{"job id missing", func() *kgo.Record {
			r := triggerRecord(t, &sundialv1.Trigger{IdempotencyKey: "k"}, sundialv1.EncodingProtobuf)
			r.Key = []byte("billing.x")
			return r
		}, "job_id", "required"},
		{"idempotency key missing", func() *kgo.Record {
			tr := base()
			tr.IdempotencyKey = ""
			return triggerRecord(t, tr, sundialv1.EncodingJSON)
		}, "idempotency_key", "required"},
		{"idempotency key too long", func() *kgo.Record {
			tr := base()
			tr.IdempotencyKey = string(make([]byte, 201))
			return triggerRecord(t, tr, sundialv1.EncodingProtobuf)
		}, "idempotency_key", "at most 200"},
		{"requested in the future", func() *kgo.Record {
			tr := base()
			tr.RequestedAt = timestamppb.New(requested.Add(time.Hour))
			return triggerRecord(t, tr, sundialv1.EncodingJSON)
		}, "requested_at", "after the record's timestamp"},
		{"requested at invalid", func() *kgo.Record {
			tr := base()
			tr.RequestedAt = &timestamppb.Timestamp{Nanos: -1}
			return triggerRecord(t, tr, sundialv1.EncodingProtobuf)
		}, "requested_at", "invalid timestamp"},
		{"payload too large", func() *kgo.Record {
			tr := base()
			tr.Payload = make([]byte, 1025)
			return triggerRecord(t, tr, sundialv1.EncodingProtobuf)
		}, "payload", "1025 bytes, at most 1024"},
		{"caller too long", func() *kgo.Record {
			tr := base()
			tr.Caller = string(make([]byte, 201))
			return triggerRecord(t, tr, sundialv1.EncodingProtobuf)
		}, "caller", "at most 200"},
		{"content type", func() *kgo.Record {
			r := triggerRecord(t, base(), sundialv1.EncodingJSON)
			r.Headers[0].Value = []byte("text/plain")
			return r
		}, "content_type", "text/plain"},
		{"undecodable", func() *kgo.Record {
			r := triggerRecord(t, base(), sundialv1.EncodingJSON)
			r.Headers = nil
			return r
		}, "record", "looks like JSON"},
		{"empty", func() *kgo.Record { return &kgo.Record{Key: []byte("billing.x"), Value: []byte{}} }, "record", "no value"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d, errs := jobspec.DecodeTrigger(c.rec(), 1024)
			if c.field == "" {
				require.Empty(t, errs)
				assert.Equal(t, "billing.x", d.JobID)
				assert.Equal(t, requested.Truncate(time.Millisecond), d.Due, "due is requested_at at millisecond precision")
				return
			}
			require.NotEmpty(t, errs)
			assert.Equal(t, c.field, errs[0].Field, "%v", errs)
			assert.Contains(t, errs[0].Reason, c.reason)
		})
	}

	// Without requested_at the record's timestamp is the due time.
	tr := base()
	tr.RequestedAt = nil
	rec := triggerRecord(t, tr, sundialv1.EncodingProtobuf)
	d, errs := jobspec.DecodeTrigger(rec, 1024)
	require.Empty(t, errs)
	assert.Equal(t, rec.Timestamp, d.Due)
}

func FuzzDecodeTrigger(f *testing.F) {
	tr := &sundialv1.Trigger{JobId: "j", IdempotencyKey: "k", RequestedAt: timestamppb.New(time.Unix(1e9, 0)), Payload: []byte("p")}
	pb, _ := proto.Marshal(tr)
	js, _ := sundialv1.EncodingJSON.Marshal(tr)
	f.Add([]byte("j"), pb, "")
	f.Add([]byte("j"), js, "application/json")
	f.Fuzz(func(t *testing.T, key, value []byte, contentType string) {
		rec := &kgo.Record{Key: key, Value: value, Timestamp: time.Unix(1e9, 0),
			Headers: []kgo.RecordHeader{{Key: "content-type", Value: []byte(contentType)}}}
		d, errs := jobspec.DecodeTrigger(rec, 1024)
		for _, e := range errs {
			if e.Field == "" || e.Reason == "" {
				t.Fatalf("error without field or reason: %+v", e)
			}
		}
		if len(errs) == 0 {
			if d.Trigger.GetJobId() != string(key) || d.Trigger.GetIdempotencyKey() == "" || d.Due.IsZero() {
				t.Fatalf("accepted an incomplete trigger: %v", d.Trigger)
			}
		}
	})
}
