package sundialv1

import (
	"mime"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestWrittenContentTypeAgreesWithMime: the fast path answers exactly what
// mime.ParseMediaType answers, for the values Sundial writes and for
// values near them, and declines the rest.
func TestWrittenContentTypeAgreesWithMime(t *testing.T) {
	t.Parallel()
	values := []string{
		EncodingProtobuf.ContentType(&RunEvent{}),
		EncodingJSON.ContentType(&Run{}),
		ProtobufContentType(&DagRunEvent{}),
		"application/x-protobuf; messageType=sundial.v1.Run_2",
		"application/x-protobuf; messageType=",
		"application/x-protobuf; messageType=a b",
		"application/x-protobuf; messageType=\"quoted\"",
		"application/x-protobuf; messageType=x;y=z",
		"application/json; messageType=sundial.v1.RunEvent; charset=utf-8",
		"APPLICATION/JSON; messageType=x",
		"application/x-protobuf;messageType=x",
		"application/x-protobuf",
		"text/plain; messageType=x",
	}
	for _, v := range values {
		enc, name, ok := writtenContentType(v)
		if !ok {
			continue
		}
		media, params, err := mime.ParseMediaType(v)
		if assert.NoError(t, err, v) {
			assert.Equal(t, name, params["messagetype"], v)
			assert.Len(t, params, 1, v)
			want := EncodingProtobuf
			if media == ContentTypeJSON {
				want = EncodingJSON
			}
			assert.Equal(t, want, enc, v)
		}
	}
	for _, v := range values[:4] {
		_, _, ok := writtenContentType(v)
		assert.True(t, ok, "what Sundial writes takes the fast path: %s", v)
	}
}

func BenchmarkParseContentType(b *testing.B) {
	v := EncodingProtobuf.ContentType(&RunEvent{})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseContentType(v); err != nil {
			b.Fatal(err)
		}
	}
}
