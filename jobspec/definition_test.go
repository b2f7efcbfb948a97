package jobspec

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

func exampleJSON(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "proto", "sundial", "v1", "testdata", "jobspec", name))
	require.NoError(t, err)
	return data
}

func header(k, v string) []kgo.RecordHeader { return []kgo.RecordHeader{{Key: k, Value: []byte(v)}} }

func TestDecodeDefinition(t *testing.T) {
	t.Parallel()
	js := exampleJSON(t, "cron-http.json")
	spec := &sundialv1.JobSpec{}
	require.NoError(t, sundialv1.EncodingJSON.Unmarshal(js, spec))
	pb, err := sundialv1.EncodingProtobuf.Marshal(spec)
	require.NoError(t, err)
	const id = "billing.nightly-invoices"

	cases := []struct {
		name      string
		key       []byte
		value     []byte
		headers   []kgo.RecordHeader
		field     string // "" means valid
		reason    string
		encoding  sundialv1.Encoding
		tombstone bool
		kind      string
	}{
		{name: "json", key: []byte(id), value: js, headers: header("content-type", "application/json; charset=utf-8"), encoding: sundialv1.EncodingJSON},
		{name: "protobuf by default", key: []byte(id), value: pb},
		{name: "protobuf named", key: []byte(id), value: pb, headers: header("Content-Type", "application/x-protobuf")},
		{name: "tombstone", key: []byte(id), tombstone: true},
		{name: "tombstone without key", tombstone: true, field: "key", reason: "missing"},
		{name: "dag left to the DAG engine", key: []byte("x"), value: []byte("whatever"), headers: header("sundial-kind", "dag"), kind: sundialv1.KindDag},
		{name: "unknown kind", key: []byte(id), value: pb, headers: header("sundial-kind", "cron"), field: "record", reason: `unknown sundial-kind header "cron"`},
		{name: "unknown content type", key: []byte(id), value: pb, headers: header("content-type", "text/yaml"), field: "content_type", reason: "text/yaml"},
		{name: "json without header", key: []byte(id), value: js, field: "record", reason: "set the record header content-type: application/json"},
		{name: "garbage protobuf", key: []byte(id), value: []byte{0xff, 0xff, 0xff}, field: "record", reason: "decode JobSpec as protobuf"},
		{name: "unknown json field", key: []byte(id), value: []byte(`{"id":"` + id + `","ownerTeem":"x"}`), headers: header("content-type", "application/json"), encoding: sundialv1.EncodingJSON, field: "record", reason: "ownerTeem"},
		{name: "empty value", key: []byte(id), value: []byte{}, field: "record", reason: "empty value"},
		{name: "key differs from id", key: []byte("other"), value: pb, field: "id", reason: `differs from the record key "other"`},
		{name: "key not an id", key: []byte("a@b"), value: pb, field: "key", reason: "not a job id"},
		{name: "key not utf-8", key: []byte{0xff}, tombstone: true, field: "key", reason: "UTF-8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d, errs := DecodeDefinition(c.key, c.value, c.headers, Limits{})
			assert.Equal(t, c.tombstone, d.Tombstone)
			assert.Equal(t, c.encoding, d.Encoding)
			assert.Equal(t, string(c.key), d.Key)
			if c.kind != "" {
				assert.Equal(t, c.kind, d.Kind)
			}
			if c.field == "" {
				require.Empty(t, errs)
				if !c.tombstone && c.kind == "" {
					assert.True(t, proto.Equal(spec, d.Spec))
				}
				return
			}
			require.NotEmpty(t, errs)
			assert.Equal(t, c.field, errs[0].Field, "%v", errs)
			assert.Contains(t, errs[0].Reason, c.reason)
		})
	}
}

func TestDecodeReportsIDOnce(t *testing.T) {
	t.Parallel()
	spec := &sundialv1.JobSpec{Id: "a@b", OwnerTeam: "t", Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "noop"}}}}
	pb, err := proto.Marshal(spec)
	require.NoError(t, err)
	_, errs := DecodeDefinition([]byte("a"), pb, nil, Limits{})
	require.Len(t, errs, 1, "%v", errs)
	assert.Equal(t, "id", errs[0].Field)
}

func TestStatusErrorsAreBounded(t *testing.T) {
	t.Parallel()
	errs := make([]FieldError, 250)
	for i := range errs {
		errs[i] = FieldError{Field: "labels[\"\xff\"]", Reason: "bad \xfe"}
	}
	out := StatusErrors(errs)
	require.Len(t, out, MaxReportedErrors+1)
	assert.Equal(t, "150 more errors not listed", out[MaxReportedErrors].GetReason())
	_, err := proto.Marshal(&sundialv1.JobStatus{Errors: out})
	assert.NoError(t, err, "invalid UTF-8 must not make the status unencodable")
}

// FuzzDecodeDefinition feeds arbitrary records to the decoder. It must never
// panic; whatever it accepts must be a valid definition that survives a
// protobuf round trip; whatever it rejects must be answerable in a status.
func FuzzDecodeDefinition(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("..", "proto", "sundial", "v1", "testdata", "jobspec", "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		js, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		spec := &sundialv1.JobSpec{}
		if err := sundialv1.EncodingJSON.Unmarshal(js, spec); err != nil {
			f.Fatal(err)
		}
		pb, err := proto.Marshal(spec)
		if err != nil {
			f.Fatal(err)
		}
		f.Add([]byte(spec.GetId()), js, "application/json")
		f.Add([]byte(spec.GetId()), pb, "")
	}
	f.Add([]byte("x"), []byte(`{"id":"x","schedule":{"cron":{"expression":"TZ=X"}}}`), "application/json")
	f.Add([]byte{}, []byte{0x0a, 0x01, '@'}, "application/protobuf")

	f.Fuzz(func(t *testing.T, key, value []byte, contentType string) {
		d, errs := DecodeDefinition(key, value, header("content-type", contentType), Limits{})
		if len(errs) > 0 {
			if _, err := proto.Marshal(&sundialv1.JobStatus{Errors: StatusErrors(errs)}); err != nil {
				t.Fatalf("status of a rejected record does not encode: %v", err)
			}
			for _, e := range errs {
				if e.Field == "" || e.Reason == "" {
					t.Fatalf("error without field or reason: %+v", e)
				}
			}
			return
		}
		if d.Tombstone {
			return
		}
		if d.Spec == nil || d.Spec.GetId() != string(key) {
			t.Fatalf("accepted a definition whose id %q is not the key %q", d.Spec.GetId(), key)
		}
		if again := Validate(d.Spec); len(again) > 0 {
			t.Fatalf("accepted an invalid definition: %v", again)
		}
		pb, err := proto.MarshalOptions{Deterministic: true}.Marshal(d.Spec)
		if err != nil {
			t.Fatalf("accepted definition does not encode: %v", err)
		}
		back, errs := DecodeDefinition(key, pb, nil, Limits{})
		if len(errs) > 0 || !proto.Equal(back.Spec, d.Spec) {
			t.Fatalf("protobuf round trip changed the definition: %v", errs)
		}
	})
}
