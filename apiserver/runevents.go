package apiserver

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// EventLog reads the run events of sundial.events for the run and watch
// services. Each read uses a client of its own, assigned partitions
// directly, in no consumer group, so that a reader takes nothing from the
// components that consume the topic.
type EventLog struct {
	// opts are the base client options: seed brokers, TLS, SASL.
	opts  []kgo.Opt
	topic string
}

// NewEventLog returns an EventLog over topic (topics.Names.Events) reached
// with the base client options opts.
func NewEventLog(opts []kgo.Opt, topic string) (*EventLog, error) {
	var errs []error
	if len(opts) == 0 {
		errs = append(errs, errors.New("event log: kafka options: must name the seed brokers"))
	}
	if topic == "" {
		errs = append(errs, errors.New("event log: topic: must not be empty"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &EventLog{opts: opts, topic: topic}, nil
}

// RunEvents returns the events of one run that the topic still holds, in
// the order they were published. Events are keyed by job id, so only the
// job's partition is read, from its start to its end when the read began.
func (l *EventLog) RunEvents(ctx context.Context, jobID, runID string) ([]*sundialv1.RunEvent, error) {
	admCl, err := kgo.NewClient(l.opts...)
	if err != nil {
		return nil, fmt.Errorf("run events: client: %w", err)
	}
	defer admCl.Close()
	ends, err := endOffsets(ctx, kadm.NewClient(admCl), l.topic)
	if err != nil {
		return nil, fmt.Errorf("run events: %w", err)
	}
	part := keyPartition(jobID, len(ends))
	end := ends[part]
	if end <= 0 {
		return nil, nil
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, l.opts...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{l.topic: {part: kgo.NewOffset().AtStart()}}))...)
	if err != nil {
		return nil, fmt.Errorf("run events: client: %w", err)
	}
	defer cl.Close()
	var out []*sundialv1.RunEvent
	for done := false; !done; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("run events: read %s: %w", l.topic, err)
		}
		if err := fetchErrors(fs); err != nil {
			return nil, fmt.Errorf("run events: %w", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset+1 >= end {
				done = true
			}
			if r.Offset >= end || string(r.Key) != jobID {
				return
			}
			if ev, ok := decodeRunEvent(r); ok && ev.GetRunId() == runID {
				out = append(out, ev)
			}
		})
	}
	return out, nil
}

// keyPartition is the partition of n that a record keyed by key is
// produced to. The producers of sundial.events key events by job id and
// hash keys as kgo's default partitioner does (murmur2, as Kafka's Java
// client), so a job's events are on this one partition.
func keyPartition(key string, n int) int32 {
	return int32(kgo.StickyKeyPartitioner(nil).ForTopic("").Partition(&kgo.Record{Key: []byte(key)}, n))
}

// endOffsets returns the end offset of each partition of topic.
func endOffsets(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int64, error) {
	listed, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	out := map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	if len(out) == 0 {
		return nil, fmt.Errorf("end offsets of %s: the topic has no partitions", topic)
	}
	return out, nil
}

// fetchErrors joins the errors of a poll.
func fetchErrors(fs kgo.Fetches) error {
	var errs []error
	fs.EachError(func(topic string, p int32, err error) {
		errs = append(errs, fmt.Errorf("read %s partition %d: %w", topic, p, err))
	})
	return errors.Join(errs...)
}

// decodeRunEvent decodes r when it holds a RunEvent: the message type its
// content-type header names, or no message type at all (records that
// predate the header). DAG run events and undecodable records are not.
func decodeRunEvent(r *kgo.Record) (*sundialv1.RunEvent, bool) {
	ev, ok, err := topics.DecodeRunEvent(r)
	if err != nil || !ok || ev.GetRunId() == "" {
		return nil, false
	}
	return ev, true
}
