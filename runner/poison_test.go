package runner

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// TestPoisonRunRecordsAreSkipped puts records that are not runs (bytes
// that do not decode, JSON under a protobuf content type, a run without a
// run id) between two runs of one partition: each is logged and counted as
// malformed and skipped, the runs around them succeed, and the committed
// offset passes all of them, so none holds the partition back.
func TestPoisonRunRecordsAreSkipped(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakeBackends(t), steadyTTL)
	r := h.start(nil)
	now := time.Now()
	before, after := h.run("poisoned", now, nil), h.run("poisoned", now.Add(time.Millisecond), nil)
	noRunID := h.run("poisoned", now, nil)
	noRunID.RunId = ""
	noRunIDValue, err := proto.Marshal(noRunID)
	require.NoError(t, err)

	topic := h.b.names.Runs(topicPriority(before.GetPriority()))
	protobuf := []kgo.RecordHeader{{Key: sundialv1.HeaderContentType, Value: []byte(sundialv1.ContentTypeProtobuf)}}
	record := func(run *sundialv1.Run) *kgo.Record {
		v, err := proto.Marshal(run)
		require.NoError(t, err)
		return &kgo.Record{Topic: topic, Key: []byte("poisoned"), Value: v}
	}
	recs := []*kgo.Record{
		record(before),
		{Topic: topic, Key: []byte("poisoned"), Value: []byte{0xff, 0x00, 0xff}},
		{Topic: topic, Key: []byte("poisoned"), Value: []byte(`{"runId":"x@1","jobId":"x"}`), Headers: protobuf},
		{Topic: topic, Key: []byte("poisoned"), Value: noRunIDValue},
		record(after),
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// One at a time, so that they sit in this order in one partition.
	for _, rec := range recs {
		require.NoError(t, h.client.ProduceSync(ctx, rec).FirstErr())
		require.Equal(t, recs[0].Partition, rec.Partition)
	}

	waitStates(t, h, before.GetRunId(), started, succeeded)
	waitStates(t, h, after.GetRunId(), started, succeeded)
	malformed := r.m.runs.WithLabelValues(outcomeMalformed)
	assert.Eventually(t, func() bool { return testutil.ToFloat64(malformed) == 3 }, wait, 10*time.Millisecond)
	require.Equal(t, 3.0, testutil.ToFloat64(malformed), "records counted as malformed")

	adm := kadm.NewClient(h.client)
	want := recs[len(recs)-1].Offset + 1
	var at atomic.Int64 // written by Eventually's goroutine
	assert.Eventually(t, func() bool {
		offs, err := adm.FetchOffsets(ctx, h.group)
		if err != nil {
			return false
		}
		o, _ := offs.Lookup(topic, recs[0].Partition)
		at.Store(o.At)
		return o.At == want
	}, wait, 10*time.Millisecond)
	require.Equal(t, want, at.Load(), "committed offset of the partition")
	assert.Equal(t, 2, h.down.figures().effects, "only the two runs took effect")
}
