package target

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/internal/tracing"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// attemptSpan is the traceparent of the attempt's span the runner puts in
// the target's context.
const attemptSpan = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestTargetsSendTheAttemptsTrace: a downstream continues the attempt's
// trace, from the traceparent header of an HTTP request or a Kafka record;
// without a trace (tracing off) none is sent.
func TestTargetsSendTheAttemptsTrace(t *testing.T) {
	t.Parallel()
	got := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("traceparent")
	}))
	defer srv.Close()
	run := httpRun(srv.URL+"/hook", nil)
	traced := tracing.WithTraceparent(context.Background(), attemptSpan)
	require.NoError(t, loopbackHTTP(t).Execute(traced, Request{Run: run, FencingToken: 1}, run.GetTarget().GetHttp()))
	assert.Equal(t, attemptSpan, <-got, "an HTTP target gets the attempt's traceparent header")
	require.NoError(t, loopbackHTTP(t).Execute(context.Background(), Request{Run: run, FencingToken: 1}, run.GetTarget().GetHttp()))
	assert.Empty(t, <-got, "without a trace no traceparent is sent")

	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "out"))
	require.NoError(t, err)
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	krun := &sundialv1.Run{RunId: "job-7@5", JobId: "job-7", Attempt: 1,
		Target: &sundialv1.Target{Kind: &sundialv1.Target_Kafka{Kafka: &sundialv1.KafkaTarget{Topic: "out"}}}}
	require.NoError(t, (&Targets{Kafka: &Kafka{Client: cl}, Egress: allowTopics(t, "out")}).Execute(traced, Request{Run: krun, FencingToken: 5}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fs := cl.PollFetches(ctx)
	require.NoError(t, fs.Err())
	require.Len(t, fs.Records(), 1)
	assert.Equal(t, attemptSpan, tracing.RecordCarrier{Record: fs.Records()[0]}.Get("traceparent"), "a Kafka target's record carries the traceparent header")
}
