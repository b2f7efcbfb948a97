package apiserver

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sundialhq/sundial/client"
)

// produceError is the one answer to a change that could not be produced to
// Kafka. A team without its topic (client.ErrNoTeamTopic) cannot be written
// until the topic is created: failed_precondition. A record Kafka refuses for its size can never be produced, however
// often it is retried: invalid_argument, naming the limit. A deadline or a
// cancellation keeps its code. Anything else (no broker, no leader) may
// pass on a retry: unavailable.
func produceError(op string, err error) error {
	switch {
	case errors.Is(err, client.ErrNoTeamTopic):
		// Not retried: the team's topic must be created first.
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("%s: %w", op, err))
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge):
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf(
			"%s: the encoded definition is larger than the largest record Kafka accepts (the producer's max record size and the topic's max.message.bytes, about 1 MB by default): make it smaller, or split it: %w", op, err))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeOf(err), fmt.Errorf("%s: %w", op, err))
	}
	return connect.NewError(connect.CodeUnavailable, fmt.Errorf("%s: %w", op, err))
}
