package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/deadletter"
)

func TestClassifyProduce(t *testing.T) {
	t.Parallel()
	const topic = "sundial.runs.default"
	tests := []struct {
		name     string
		err      error
		wantDead bool
		wantCode string
	}{
		{name: "no error is not a refusal", err: nil},
		{name: "a record over the client's batch limit is dead-lettered",
			err: fmt.Errorf("%w (uncompressed_bytes=%d)", kerr.MessageTooLarge, 1000400), wantDead: true, wantCode: deadletter.CodeRecordTooLarge},
		{name: "a record over the broker's limit is dead-lettered", err: kerr.MessageTooLarge, wantDead: true, wantCode: deadletter.CodeRecordTooLarge},
		{name: "a record list too large is dead-lettered", err: kerr.RecordListTooLarge, wantDead: true, wantCode: deadletter.CodeRecordTooLarge},
		{name: "an invalid record is dead-lettered", err: kerr.InvalidRecord, wantDead: true, wantCode: deadletter.CodeRecordInvalid},
		{name: "an invalid topic is dead-lettered", err: kerr.InvalidTopicException, wantDead: true, wantCode: deadletter.CodeTopicRefused},
		{name: "a topic the dispatcher may not write is dead-lettered", err: kerr.TopicAuthorizationFailed, wantDead: true, wantCode: deadletter.CodeTopicRefused},
		{name: "a wrapped refusal is still one", err: fmt.Errorf("produce: %w", kerr.InvalidRecord), wantDead: true, wantCode: deadletter.CodeRecordInvalid},
		{name: "a timed-out request is tried again", err: kerr.RequestTimedOut},
		{name: "a leader moving is tried again", err: kerr.NotLeaderForPartition},
		{name: "too few in-sync replicas is tried again", err: kerr.NotEnoughReplicas},
		{name: "a topic not created yet is tried again", err: kerr.UnknownTopicOrPartition},
		{name: "a corrupt message (a bad network) is tried again", err: kerr.CorruptMessage},
		{name: "an ended context is tried again", err: context.DeadlineExceeded},
		{name: "a record the client timed out is tried again", err: kgo.ErrRecordTimeout},
		{name: "an unknown error is tried again", err: errors.New("broker down")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := classifyProduce(tt.err, 1000400, topic)
			assert.Equal(t, tt.wantDead, v.deadLetter)
			if !tt.wantDead {
				assert.Nil(t, v.runErr)
				return
			}
			assert.Equal(t, tt.wantCode, v.runErr.GetCode())
			assert.False(t, v.runErr.GetRetryable())
			if tt.wantCode == deadletter.CodeRecordTooLarge {
				assert.Contains(t, v.runErr.GetMessage(), "dispatch: run record is 1000400 bytes, over the limit")
			}
		})
	}
}

func TestDeadLetterRunOfATooLargeRunLeavesOutWhatMadeItLarge(t *testing.T) {
	t.Parallel()
	run := &sundialv1.Run{RunId: "a.b@1", JobId: "a.b", Payload: make([]byte, 1<<20),
		Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "noop"}}}}
	small := deadLetterRun(run, deadletter.CodeRecordTooLarge)
	assert.Empty(t, small.GetPayload())
	assert.Nil(t, small.GetTarget())
	assert.Equal(t, "a.b@1", small.GetRunId())
	assert.Len(t, run.GetPayload(), 1<<20, "the run itself is left as it was")
	whole := deadLetterRun(run, deadletter.CodeTopicRefused)
	assert.Len(t, whole.GetPayload(), 1<<20)
	assert.NotNil(t, whole.GetTarget())
}
