package sundialv1

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestParseContentType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		value   string
		want    Encoding
		wantErr bool
	}{
		{value: "", want: EncodingProtobuf},
		{value: "  ", want: EncodingProtobuf},
		{value: "application/x-protobuf", want: EncodingProtobuf},
		{value: "application/protobuf", want: EncodingProtobuf},
		{value: "Application/X-Protobuf", want: EncodingProtobuf},
		{value: "application/json", want: EncodingJSON},
		{value: "application/json; charset=utf-8", want: EncodingJSON},
		{value: "APPLICATION/JSON", want: EncodingJSON},
		{value: "text/plain", wantErr: true},
		{value: "application/jsonx", wantErr: true},
		{value: "json", wantErr: true},
		{value: "application/json; charset", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			t.Parallel()
			got, err := ParseContentType(tt.value)
			if tt.wantErr {
				require.ErrorIs(t, err, ErrContentType)
				assert.Contains(t, err.Error(), tt.value)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestEncodingStringIsItsContentType(t *testing.T) {
	t.Parallel()
	for _, enc := range []Encoding{EncodingProtobuf, EncodingJSON} {
		got, err := ParseContentType(enc.String())
		require.NoError(t, err)
		assert.Equal(t, enc, got)
	}
}

func TestUnmarshalErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		contentType string
		data        string
		want        []string // substrings of the error
	}{
		{
			name:        "misspelled JSON field is rejected, not ignored",
			contentType: ContentTypeJSON,
			data:        `{"id": "a", "ownerTeem": "x"}`,
			want:        []string{"JobSpec", "ownerTeem"},
		},
		{
			name:        "enum value that does not exist",
			contentType: ContentTypeJSON,
			data:        `{"id": "a", "priority": "PRIORITY_URGENT"}`,
			want:        []string{"PRIORITY_URGENT"},
		},
		{
			name:        "duration in minutes is not protojson",
			contentType: ContentTypeJSON,
			data:        `{"id": "a", "timeout": "5m"}`,
			want:        []string{"5m"},
		},
		{
			name:        "JSON without content-type gets a hint",
			contentType: "",
			data:        `  {"id": "a"}`,
			want:        []string{"as protobuf", "content-type: application/json"},
		},
		{
			name:        "unsupported content type",
			contentType: "text/yaml",
			data:        `id: a`,
			want:        []string{"unsupported content type", "text/yaml"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := Unmarshal(tt.contentType, []byte(tt.data), &JobSpec{})
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestUnmarshalProtobuf(t *testing.T) {
	t.Parallel()
	want := &JobSpec{
		Id:        "a",
		OwnerTeam: "t",
		Timeout:   durationpb.New(1500_000_000),
		Revision:  proto.Uint64(7),
	}
	data, err := EncodingProtobuf.Marshal(want)
	require.NoError(t, err)
	for _, ct := range []string{"", ContentTypeProtobuf, "application/protobuf"} {
		got := &JobSpec{}
		require.NoError(t, Unmarshal(ct, data, got), ct)
		assert.True(t, proto.Equal(want, got), ct)
	}
}

func TestMarshalIsDeterministic(t *testing.T) {
	t.Parallel()
	// Maps are where Go's iteration order could leak into the bytes.
	spec := &JobSpec{Id: "a", Labels: map[string]string{}}
	for i := range 50 {
		spec.Labels[string(rune('a'+i%26))+string(rune('a'+i/26))] = "v"
	}
	first, err := EncodingProtobuf.Marshal(spec)
	require.NoError(t, err)
	for range 20 {
		again, err := EncodingProtobuf.Marshal(spec)
		require.NoError(t, err)
		require.Equal(t, first, again)
	}
}

// FuzzUnmarshalJobSpec feeds arbitrary record values to the decoder the
// registry uses. It must never panic, and whatever it accepts must survive a
// round trip through the same encoding unchanged.
func FuzzUnmarshalJobSpec(f *testing.F) {
	for _, name := range []string{"cron-http", "immediate", "at", "delay", "interval-start", "interval-offset"} {
		data, err := os.ReadFile("testdata/jobspec/" + name + ".json")
		require.NoError(f, err)
		f.Add(data, true)
		spec := &JobSpec{}
		require.NoError(f, EncodingJSON.Unmarshal(data, spec))
		bin, err := EncodingProtobuf.Marshal(spec)
		require.NoError(f, err)
		f.Add(bin, false)
	}
	f.Add([]byte(`{"schedule":{"cron":{"expression":"@every 5m"}},"revision":1e3}`), true)
	f.Add([]byte{0x0a, 0x01}, false)

	f.Fuzz(func(t *testing.T, data []byte, asJSON bool) {
		enc := EncodingProtobuf
		if asJSON {
			enc = EncodingJSON
		}
		spec := &JobSpec{}
		if err := enc.Unmarshal(data, spec); err != nil {
			return
		}
		again, err := enc.Marshal(spec)
		require.NoError(t, err)
		got := &JobSpec{}
		require.NoError(t, enc.Unmarshal(again, got))
		require.True(t, proto.Equal(spec, got), "round trip changed %v into %v", spec, got)
	})
}

func TestParseEncoding(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		want Encoding
		bad  bool
	}{
		{"", EncodingProtobuf, false},
		{"protobuf", EncodingProtobuf, false},
		{"JSON", EncodingJSON, false},
		{"yaml", 0, true},
	} {
		got, err := ParseEncoding(tc.name)
		if tc.bad {
			if err == nil || !strings.Contains(err.Error(), "want protobuf or json") {
				t.Errorf("ParseEncoding(%q) = %v, %v: want an error naming the choices", tc.name, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseEncoding(%q) = %v, %v: want %v", tc.name, got, err, tc.want)
		}
	}
}
