package target

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/internal/tracing"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// Kafka produces the records of Kafka targets.
type Kafka struct {
	// Client produces the records. It must not be a transactional client.
	Client *kgo.Client
}

var reservedRecordHeaders = []string{RecordHeaderIdempotencyKey, RecordHeaderJobID, RecordHeaderRunID, RecordHeaderAttempt, RecordHeaderFencingToken, RecordHeaderShard, RecordHeaderShardCount}

// Execute produces the run's payload to t.topic and waits for the broker's
// acknowledgement.
func (k *Kafka) Execute(ctx context.Context, req Request, t *sundialv1.KafkaTarget) error {
	if t.GetTopic() == "" {
		return invalid("target.kafka.topic: is empty")
	}
	key := t.GetKey()
	if key == "" {
		key = req.Run.GetJobId()
	}
	rec := &kgo.Record{Topic: t.GetTopic(), Key: []byte(key), Value: req.Run.GetPayload()}
	for name, v := range t.GetHeaders() {
		for _, r := range reservedRecordHeaders {
			if name == r {
				return invalid("target.kafka.headers: %s is set by the runner", r)
			}
		}
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: name, Value: []byte(v)})
	}
	rec.Headers = append(rec.Headers,
		kgo.RecordHeader{Key: RecordHeaderIdempotencyKey, Value: []byte(req.Run.GetRunId())},
		kgo.RecordHeader{Key: RecordHeaderJobID, Value: []byte(req.Run.GetJobId())},
		kgo.RecordHeader{Key: RecordHeaderRunID, Value: []byte(req.Run.GetRunId())},
		kgo.RecordHeader{Key: RecordHeaderAttempt, Value: []byte(req.attempt())},
		kgo.RecordHeader{Key: RecordHeaderFencingToken, Value: []byte(req.token())},
	)
	if i, n, ok := req.shard(); ok {
		rec.Headers = append(rec.Headers,
			kgo.RecordHeader{Key: RecordHeaderShard, Value: []byte(i)},
			kgo.RecordHeader{Key: RecordHeaderShardCount, Value: []byte(n)},
		)
	}
	// The consumer continues the attempt's trace (tracing on).
	tracing.Inject(ctx, tracing.RecordCarrier{Record: rec})
	if err := k.Client.ProduceSync(ctx, rec).FirstErr(); err != nil {
		if ctx.Err() != nil {
			return Classify(context.Cause(ctx), CodeKafka)
		}
		var ke *kerr.Error
		if errors.As(err, &ke) && !ke.Retriable {
			return &Error{Code: CodeKafka, Message: err.Error(), Err: err}
		}
		return &Error{Code: CodeKafka, Message: err.Error(), Retryable: true, Err: err}
	}
	return nil
}
