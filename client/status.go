package client

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/internal/backoff"
	"github.com/sundialhq/sundial/internal/startoffsets"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// ErrUndecodableStatus is wrapped by the error Statuses yields for a record
// of sundial.jobs.status that does not decode; reading goes on after it.
var ErrUndecodableStatus = errors.New("status record does not decode")

// statusSkew is how far before a definition's record the status topic is
// read from: the registry stamps its answers with its own clock, which may be
// behind the producer's.
const statusSkew = time.Minute

// WaitStatus waits for the registry's answer to each receipt of
// sundial.jobs (from Apply, ApplyAll, ApplyJSON or Delete) and returns them
// in the receipts' order. It reads sundial.jobs.status from shortly before
// the oldest receipt; an answer is matched by the source it names (topic,
// partition, offset), so answers to other records of the same job are
// ignored. It returns ctx's error, with the answers found so far, when ctx
// ends first.
func (c *Client) WaitStatus(ctx context.Context, receipts ...Receipt) ([]*sundialv1.JobStatus, error) {
	if len(receipts) == 0 {
		return nil, nil
	}
	type src struct {
		topic     string
		partition int32
		offset    int64
	}
	want := make(map[src]int, len(receipts))
	since := receipts[0].Timestamp
	for i, r := range receipts {
		if !c.definitionsTopic(r.Topic) {
			return nil, fmt.Errorf("wait status: receipt %d is from %s, not a definitions topic (%s or %s<team>): only definitions and deletes are answered on %s",
				i, r.Topic, c.cfg.Topics.Jobs(), c.cfg.Topics.Jobs()+".", c.cfg.Topics.JobsStatus())
		}
		want[src{r.Topic, r.Partition, r.Offset}] = i
		if r.Timestamp.Before(since) {
			since = r.Timestamp
		}
	}
	out := make([]*sundialv1.JobStatus, len(receipts))
	missing := len(receipts)
	for st, err := range c.Statuses(ctx, since.Add(-statusSkew)) {
		if errors.Is(err, ErrUndecodableStatus) {
			// Someone else's bad record; the answers after it still count.
			c.cfg.Logger.Warn("skipping a status record that does not decode", "err", err)
			continue
		}
		if err != nil {
			return out, fmt.Errorf("wait status: %d of %d answers missing: %w", missing, len(receipts), err)
		}
		s := st.GetSource()
		i, ok := want[src{s.GetTopic(), s.GetPartition(), s.GetOffset()}]
		if !ok || out[i] != nil {
			continue
		}
		out[i] = st
		if missing--; missing == 0 {
			return out, nil
		}
	}
	return out, fmt.Errorf("wait status: %d of %d answers missing: %w", missing, len(receipts), ctx.Err())
}

// Statuses yields every answer on sundial.jobs.status written from since on
// (by record timestamp), as it arrives, until ctx ends or the caller stops.
// A status that does not decode is yielded as an error wrapping
// ErrUndecodableStatus and reading goes on;
// when ctx ends, its error is yielded last. It reads the partitions the topic
// has when it starts (the status topic's partitions are fixed at setup).
func (c *Client) Statuses(ctx context.Context, since time.Time) iter.Seq2[*sundialv1.JobStatus, error] {
	return func(yield func(*sundialv1.JobStatus, error) bool) {
		opts := append([]kgo.Opt{kgo.FetchMaxWait(200 * time.Millisecond)}, c.cfg.Kafka...)
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			yield(nil, fmt.Errorf("statuses: kafka: %w", err))
			return
		}
		defer cl.Close()
		topic := c.cfg.Topics.JobsStatus()
		var starts map[int32]int64
		err = backoff.Retry(ctx, backoff.Config{
			Min: 100 * time.Millisecond,
			Max: 2 * time.Second,
			OnRetry: func(err error) {
				c.cfg.Logger.Warn("finding where to read statuses from; the client retries", "err", err)
			},
		}, func() (err error) {
			starts, err = startoffsets.Since(ctx, kadm.NewClient(cl), topic, since)
			return err
		})
		if err != nil { // ctx ended; err says what failed before
			yield(nil, err)
			return
		}
		parts := make(map[int32]kgo.Offset, len(starts))
		for p, o := range starts {
			parts[p] = kgo.NewOffset().At(o)
		}
		cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts})
		for {
			fetches := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				yield(nil, ctx.Err())
				return
			}
			var errs []error
			fetches.EachError(func(topic string, p int32, err error) {
				errs = append(errs, fmt.Errorf("fetch %s[%d]: %w", topic, p, err))
			})
			for _, err := range errs {
				c.cfg.Logger.Warn("reading statuses; the client retries", "err", err)
			}
			for it := fetches.RecordIter(); !it.Done(); {
				rec := it.Next()
				st := &sundialv1.JobStatus{}
				if err := sundialv1.Decode(contentType(rec), rec.Value, st); err != nil {
					if !yield(nil, fmt.Errorf("%w: %s[%d]@%d: %w", ErrUndecodableStatus, rec.Topic, rec.Partition, rec.Offset, err)) {
						return
					}
					continue
				}
				if !yield(st, nil) {
					return
				}
			}
		}
	}
}

func contentType(rec *kgo.Record) string {
	for _, h := range rec.Headers {
		if strings.EqualFold(h.Key, sundialv1.HeaderContentType) {
			return string(h.Value)
		}
	}
	return ""
}

// FieldErrors returns the errors of a rejected status as text, one per
// line, or nil when it was not rejected.
func FieldErrors(st *sundialv1.JobStatus) error {
	if st.GetOutcome() != sundialv1.DefinitionOutcome_DEFINITION_OUTCOME_REJECTED {
		return nil
	}
	var errs []error
	for _, e := range st.GetErrors() {
		errs = append(errs, fmt.Errorf("%s: %s", e.GetField(), e.GetReason()))
	}
	return errors.Join(errs...)
}
