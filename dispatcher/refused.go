package dispatcher

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"google.golang.org/protobuf/proto"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/deadletter"
)

// produceVerdict is what a failed produce of one run record means.
type produceVerdict struct {
	// deadLetter: the record can never be written; the run is
	// dead-lettered with runErr and the firing counts as done. Otherwise the
	// firing is tried again (today's rule for every other error).
	deadLetter bool
	runErr     *sundialv1.RunError
}

// classifyProduce decides whether a run record that Kafka (or the client,
// before sending it) refused with err is tried again or dead-lettered.
// size is the encoded record value, topic the topic it was meant for.
//
// Only errors that trying again cannot cure dead-letter: the record is too
// large (the client's own check, from kgo.ProducerBatchMaxBytes or
// kgo.MaxBufferedBytes, and the broker's, both kerr.MessageTooLarge; or
// RECORD_LIST_TOO_LARGE), the broker calls it invalid, or the topic is
// invalid or not writable by the dispatcher. Retrying one of them would
// hold the entry in memory for ever, and with it the shard's watermark.
// Everything else (timeouts, a leader moving, an ended context, an unknown
// topic that may yet be created) is tried again with the same run id.
func classifyProduce(err error, size int, topic string) produceVerdict {
	dead := func(code, msg string) produceVerdict {
		return produceVerdict{deadLetter: true, runErr: &sundialv1.RunError{Code: code, Message: msg}}
	}
	switch {
	case err == nil:
		return produceVerdict{}
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge):
		return dead(deadletter.CodeRecordTooLarge, fmt.Sprintf("dispatch: run record is %d bytes, over the limit (%v); make the job's payload, body or headers smaller", size, err))
	case errors.Is(err, kerr.InvalidRecord):
		return dead(deadletter.CodeRecordInvalid, fmt.Sprintf("dispatch: the broker refused the run record of %d bytes as invalid: %v", size, err))
	case errors.Is(err, kerr.InvalidTopicException):
		return dead(deadletter.CodeTopicRefused, fmt.Sprintf("dispatch: runs topic %q is not a valid topic: %v", topic, err))
	case errors.Is(err, kerr.TopicAuthorizationFailed):
		return dead(deadletter.CodeTopicRefused, fmt.Sprintf("dispatch: the dispatcher may not write runs topic %q: %v", topic, err))
	}
	return produceVerdict{}
}

// deadLetterRun returns the run as its dead letter carries it: whole,
// except for a run refused as too large, which goes without its payload
// and target (the dead letter must fit where the run did not).
func deadLetterRun(run *sundialv1.Run, code string) *sundialv1.Run {
	out := proto.Clone(run).(*sundialv1.Run)
	if code == deadletter.CodeRecordTooLarge {
		out.Payload, out.Target = nil, nil
	}
	return out
}
