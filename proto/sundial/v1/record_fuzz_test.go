package sundialv1

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// fuzzRecord feeds arbitrary record values, as protobuf or JSON, to the
// decoder of the message newMsg makes, the one every consumer of its topic
// calls first. It must never panic, and whatever it accepts must survive a
// round trip through the same encoding unchanged. seeds are valid messages;
// each is added in both encodings.
func fuzzRecord(f *testing.F, newMsg func() proto.Message, seeds ...proto.Message) {
	f.Helper()
	for _, m := range seeds {
		bin, err := EncodingProtobuf.Marshal(m)
		require.NoError(f, err)
		f.Add(bin, false)
		js, err := EncodingJSON.Marshal(m)
		require.NoError(f, err)
		f.Add(js, true)
	}
	f.Add([]byte{0xff, 0x00, 0xff}, false)
	f.Add([]byte(`{"unknownField":1}`), true)
	f.Fuzz(func(t *testing.T, data []byte, asJSON bool) {
		enc := EncodingProtobuf
		if asJSON {
			enc = EncodingJSON
		}
		m := newMsg()
		if err := enc.Unmarshal(data, m); err != nil {
			return
		}
		again, err := enc.Marshal(m)
		require.NoError(t, err)
		got := newMsg()
		require.NoError(t, enc.Unmarshal(again, got))
		require.True(t, proto.Equal(m, got), "round trip changed %v into %v", m, got)
	})
}

// seedFiles returns the JSON test data of dir decoded into messages.
func seedFiles(f *testing.F, dir string, newMsg func() proto.Message) []proto.Message {
	f.Helper()
	entries, err := os.ReadDir("testdata/" + dir)
	require.NoError(f, err)
	var out []proto.Message
	for _, e := range entries {
		data, err := os.ReadFile("testdata/" + dir + "/" + e.Name())
		require.NoError(f, err)
		m := newMsg()
		require.NoError(f, EncodingJSON.Unmarshal(data, m), e.Name())
		out = append(out, m)
	}
	return out
}

func fuzzRun() *Run {
	return &Run{
		RunId: "ops.rollup@1767261000000", JobId: "ops.rollup", DueTime: timestamppb.New(timestamppb.Now().AsTime()),
		AttemptDueTime: timestamppb.Now(), Attempt: 2, Priority: Priority_PRIORITY_HIGH, Origin: RunOrigin_RUN_ORIGIN_RETRY,
		Target:  &Target{Kind: &Target_Http{Http: &HttpTarget{Url: "http://127.0.0.1/x"}}},
		Timeout: durationpb.New(10e9), Payload: []byte("p"),
		Retry: &RetryPolicy{MaxAttempts: 3, InitialBackoff: durationpb.New(1e9)},
	}
}

// FuzzUnmarshalRun: run records of sundial.runs.* (runners).
func FuzzUnmarshalRun(f *testing.F) {
	fuzzRecord(f, func() proto.Message { return &Run{} }, fuzzRun())
}

// FuzzUnmarshalRunEvent: events of sundial.events (DAG engine, history,
// load generator).
func FuzzUnmarshalRunEvent(f *testing.F) {
	fuzzRecord(f, func() proto.Message { return &RunEvent{} }, &RunEvent{
		RunId: "ops.rollup@1767261000000", JobId: "ops.rollup", Attempt: 1, State: RunState_RUN_STATE_FAILED,
		Time: timestamppb.Now(), RunnerId: "runner-0", FencingToken: 7, DagRunId: "etl@1767261000000",
		Error: &RunError{Code: "http_500", Message: "boom"},
	})
}

// FuzzUnmarshalDagRunEvent: DAG run events of sundial.events.
func FuzzUnmarshalDagRunEvent(f *testing.F) {
	fuzzRecord(f, func() proto.Message { return &DagRunEvent{} }, &DagRunEvent{DagRunId: "etl@1767261000000", DagId: "etl"})
}

// FuzzUnmarshalJobStatus: answers of sundial.jobs.status (client).
func FuzzUnmarshalJobStatus(f *testing.F) {
	newMsg := func() proto.Message { return &JobStatus{} }
	fuzzRecord(f, newMsg, seedFiles(f, "jobstatus", newMsg)...)
}

// FuzzUnmarshalTrigger: requests of sundial.triggers (trigger consumer).
func FuzzUnmarshalTrigger(f *testing.F) {
	newMsg := func() proto.Message { return &Trigger{} }
	fuzzRecord(f, newMsg, seedFiles(f, "trigger", newMsg)...)
}

// FuzzUnmarshalDeadLetter: records of the dead-letter topic (replay).
func FuzzUnmarshalDeadLetter(f *testing.F) {
	fuzzRecord(f, func() proto.Message { return &DeadLetter{} }, &DeadLetter{Run: fuzzRun()})
}
