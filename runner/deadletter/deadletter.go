package deadletter

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// Codes of the RunError of a run the dispatcher dead-lettered because
// Kafka refused its record for good.
const (
	// CodeRecordTooLarge: the run record is over the producer's or the
	// broker's record limit; the dead letter's run has no payload or
	// target.
	CodeRecordTooLarge = "record_too_large"
	// CodeRecordInvalid: the broker refused the record as invalid.
	CodeRecordInvalid = "record_invalid"
	// CodeTopicRefused: the runs topic is not a valid topic name, or the
	// dispatcher may not write it.
	CodeTopicRefused = "topic_refused"
)

// Filter selects dead letters. Zero fields select everything.
type Filter struct {
	JobID string
	RunID string
	// Since and Until bound the time the run was declared dead:
	// Since <= dead_at < Until.
	Since, Until time.Time
}

// Match reports whether dl passes f.
func (f Filter) Match(dl *sundialv1.DeadLetter) bool {
	at := dl.GetDeadAt().AsTime()
	switch {
	case f.JobID != "" && dl.GetRun().GetJobId() != f.JobID,
		f.RunID != "" && dl.GetRun().GetRunId() != f.RunID,
		!f.Since.IsZero() && at.Before(f.Since),
		!f.Until.IsZero() && !at.Before(f.Until):
		return false
	}
	return true
}

// Read returns the dead letters of topic that pass f, from the start of the
// topic to its end when Read began, oldest by dead_at first. opts are the
// base client options (seed brokers, TLS, SASL); Read assigns the partitions
// itself, in no consumer group.
func Read(ctx context.Context, opts []kgo.Opt, topic string, f Filter) ([]*sundialv1.DeadLetter, error) {
	admCl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("dead letters: client: %w", err)
	}
	defer admCl.Close()
	ends, err := kadm.NewClient(admCl).ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("dead letters: end offsets of %s: %w", topic, err)
	}
	if err := ends.Error(); err != nil {
		return nil, fmt.Errorf("dead letters: end offsets of %s: %w", topic, err)
	}
	want := map[int32]int64{}
	start := map[string]map[int32]kgo.Offset{topic: {}}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			start[topic][o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	if len(want) == 0 {
		return nil, nil
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, opts...), kgo.ConsumePartitions(start))...)
	if err != nil {
		return nil, fmt.Errorf("dead letters: client: %w", err)
	}
	defer cl.Close()
	var out []*sundialv1.DeadLetter
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("dead letters: read %s: %w", topic, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return nil, fmt.Errorf("dead letters: read %s: %w", topic, ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := want[r.Partition]; ok && r.Offset+1 >= end {
				delete(want, r.Partition)
			}
			dl := &sundialv1.DeadLetter{}
			if proto.Unmarshal(r.Value, dl) != nil || dl.GetRun() == nil {
				return
			}
			if f.Match(dl) {
				out = append(out, dl)
			}
		})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].GetDeadAt().AsTime().Before(out[j].GetDeadAt().AsTime()) })
	return out, nil
}

// ReplayEntries returns one due entry per run of dls (the newest dead letter
// of each run), due at now.
func ReplayEntries(dls []*sundialv1.DeadLetter, now time.Time) ([]store.DueEntry, error) {
	due := store.Truncate(now)
	latest := map[string]*sundialv1.DeadLetter{}
	var order []string
	for _, dl := range dls {
		id := dl.GetRun().GetRunId()
		prev, ok := latest[id]
		if !ok {
			order = append(order, id)
		}
		if !ok || !dl.GetDeadAt().AsTime().Before(prev.GetDeadAt().AsTime()) {
			latest[id] = dl
		}
	}
	out := make([]store.DueEntry, 0, len(order))
	for _, id := range order {
		run := proto.Clone(latest[id].GetRun()).(*sundialv1.Run)
		run.Attempt = 1
		run.AttemptDueTime = timestamppb.New(due)
		run.Origin = sundialv1.RunOrigin_RUN_ORIGIN_REPLAY
		run.DispatchedAt = nil
		payload, err := proto.Marshal(run)
		if err != nil {
			return nil, fmt.Errorf("replay %s: %w", id, err)
		}
		e := store.DueEntry{Due: due, JobID: run.GetJobId(), Kind: store.KindRetry, RunID: id, Attempt: 1,
			Revision: max(run.GetDefinitionOffset(), 0), Payload: payload}
		if latest[id].GetLastError().GetCode() == CodeRecordTooLarge {
			// The dead letter's run lacks its payload and target: the
			// dispatcher builds the run from the job again.
			e.Payload = nil
		}
		if err := e.Validate(); err != nil {
			return nil, fmt.Errorf("replay %s: %w", id, err)
		}
		out = append(out, e)
	}
	return out, nil
}
