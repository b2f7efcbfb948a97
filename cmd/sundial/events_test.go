package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

func eventRecord(t *testing.T, m proto.Message, headers []kgo.RecordHeader) *kgo.Record {
	t.Helper()
	b, err := proto.Marshal(m)
	require.NoError(t, err)
	return &kgo.Record{Key: []byte("k"), Value: b, Headers: headers}
}

func TestFormatEvent(t *testing.T) {
	t.Parallel()
	at := timestamppb.New(time.Date(2026, 11, 25, 1, 2, 3, 456e6, time.UTC))
	run := &sundialv1.RunEvent{RunId: "billing.x@1", JobId: "billing.x", Attempt: 2, State: sundialv1.RunState_RUN_STATE_FAILED,
		Time: at, RunnerId: "r-1", Duration: durationpb.New(1500 * time.Millisecond),
		Error: &sundialv1.RunError{Code: "http_503", Message: "unavailable"}}
	dag := &sundialv1.DagRunEvent{DagRunId: "d@1", DagId: "d", NodeId: "n1", State: sundialv1.DagState_DAG_STATE_RUNNING, Time: at}
	for _, tc := range []struct {
		name string
		rec  *kgo.Record
		want string
	}{
		{"run event", eventRecord(t, run, topics.EventHeaders(run)),
			"2026-11-25T01:02:03.456Z  FAILED     job billing.x  run billing.x@1  attempt 2  runner r-1  took 1.5s  error http_503: unavailable"},
		{"dag run event", eventRecord(t, dag, topics.EventHeaders(dag)),
			"2026-11-25T01:02:03.456Z  RUNNING    dag d  dag run d@1  node n1"},
		{"kind header only", eventRecord(t, dag, []kgo.RecordHeader{{Key: sundialv1.HeaderKind, Value: []byte(sundialv1.KindDagRunEvent)}}),
			"2026-11-25T01:02:03.456Z  RUNNING    dag d  dag run d@1  node n1"},
		{"no headers: a run event", eventRecord(t, run, nil),
			"2026-11-25T01:02:03.456Z  FAILED     job billing.x  run billing.x@1  attempt 2  runner r-1  took 1.5s  error http_503: unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := formatEvent(tc.rec, false)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}

	js, err := formatEvent(eventRecord(t, run, topics.EventHeaders(run)), true)
	require.NoError(t, err)
	var back map[string]any
	require.NoError(t, json.Unmarshal([]byte(js), &back), js)
	assert.Equal(t, "RUN_STATE_FAILED", back["state"])
	assert.Equal(t, "billing.x", back["jobId"])

	_, err = formatEvent(eventRecord(t, &sundialv1.Run{}, topics.ProtobufHeaders(&sundialv1.Run{})), false)
	assert.ErrorContains(t, err, "message type sundial.v1.Run: not an event")
	_, err = formatEvent(&kgo.Record{Value: []byte("{not protobuf")}, false)
	assert.ErrorContains(t, err, "decode RunEvent")
}

func TestEventsTailBadFlags(t *testing.T) {
	t.Parallel()
	code, _, errOut := runCLI(t, "events", "tail", "--kafka-brokers", "127.0.0.1:1", "--output", "xml")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `--output "xml"`)
	// Both are refused before any connection: the broker is unreachable.
	code, _, errOut = runCLI(t, "events", "tail", "--kafka-brokers", "127.0.0.1:1", "-n", "-1")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "--count -1")
	code, _, errOut = runCLI(t, "events", "tail", "--kafka-brokers", "127.0.0.1:1", "some.job")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "name the job with --job")
}
