package runner

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// FuzzDecodeRun feeds arbitrary values and content types to decodeRun, the
// runner's first step with every record of sundial.runs.*. It must never
// panic, and a run it accepts has a run id, a job id and an attempt of at
// least 1, whatever the record held: the rest of the runner relies on them.
func FuzzDecodeRun(f *testing.F) {
	due := time.UnixMilli(1767261000000)
	run := &sundialv1.Run{RunId: "ops.rollup@1767261000000", JobId: "ops.rollup", DueTime: timestamppb.New(due), Attempt: 2}
	bin, err := proto.Marshal(run)
	require.NoError(f, err)
	js, err := sundialv1.EncodingJSON.Marshal(run)
	require.NoError(f, err)
	f.Add(bin, "")
	f.Add(bin, sundialv1.ContentTypeProtobuf)
	f.Add(js, sundialv1.ContentTypeJSON)
	f.Add(js, sundialv1.ContentTypeProtobuf)
	f.Add([]byte{0xff}, "")
	f.Add([]byte(`{"runId":"a@1"}`), "application/x-unknown")
	f.Fuzz(func(t *testing.T, value []byte, contentType string) {
		rec := &kgo.Record{Value: value}
		if contentType != "" {
			rec.Headers = []kgo.RecordHeader{{Key: sundialv1.HeaderContentType, Value: []byte(contentType)}}
		}
		got := &sundialv1.Run{}
		if err := decodeRun(rec, got); err != nil {
			return
		}
		require.NotEmpty(t, got.GetRunId())
		require.NotEmpty(t, got.GetJobId())
		require.GreaterOrEqual(t, got.GetAttempt(), uint32(1))
	})
}
