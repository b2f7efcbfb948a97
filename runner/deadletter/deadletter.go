package deadletter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/jobspec"
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
		dl := latest[id]
		run := proto.Clone(dl.GetRun()).(*sundialv1.Run)
		before := max(run.GetAttempt(), dl.GetAttempts())
		tooLarge := dl.GetLastError().GetCode() == CodeRecordTooLarge
		if tooLarge {
			// The dispatcher could not write the dead attempt, so it
			// never ran: the replay is that attempt, built from the job.
			before = max(before, 1) - 1
		}
		run.Attempt = before + 1
		run.AttemptsBeforeReplay = before
		run.AttemptDueTime = timestamppb.New(due)
		run.Origin = sundialv1.RunOrigin_RUN_ORIGIN_REPLAY
		run.DispatchedAt = nil
		payload, err := proto.Marshal(run)
		if err != nil {
			return nil, fmt.Errorf("replay %s: %w", id, err)
		}
		e := store.DueEntry{Due: due, JobID: run.GetJobId(), Kind: store.KindRetry, RunID: id, Attempt: int(run.GetAttempt()),
			Revision: max(run.GetDefinitionOffset(), 0), Payload: payload}
		if tooLarge {
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

// WithDefinition rewrites a replay entry's run with what the job's current
// definition says (target, payload, timeout, retries, priority, team,
// labels, concurrency, overlap, queue delay, pool, routing), keeping the
// run's identity and attempt. revision is the definition's revision (the
// offset of its record on sundial.jobs). An entry without a run (a run too
// large to write) is left for the dispatcher to build from the job.
func WithDefinition(e *store.DueEntry, spec *sundialv1.JobSpec, revision int64) error {
	e.Revision = revision
	if len(e.Payload) == 0 {
		return nil
	}
	run := &sundialv1.Run{}
	if err := proto.Unmarshal(e.Payload, run); err != nil {
		return fmt.Errorf("decode replayed run %s: %w", e.RunID, err)
	}
	run.Priority = cmp.Or(spec.GetPriority(), sundialv1.Priority_PRIORITY_DEFAULT)
	run.DefinitionOffset = revision
	run.OwnerTeam = spec.GetOwnerTeam()
	run.Labels = spec.GetLabels()
	run.Payload = spec.GetPayload()
	run.Target = spec.GetTarget()
	run.Timeout = cmp.Or(spec.GetTimeout(), durationpb.New(jobspec.DefaultTimeout))
	run.Retry = spec.GetRetry()
	run.ConcurrencyLimit = spec.GetConcurrencyLimit()
	run.OverlapPolicy = spec.GetOverlapPolicy()
	run.QueueDelay = spec.GetQueueDelay()
	run.Pool = spec.GetPool()
	run.Routing = spec.GetRouting()
	payload, err := proto.Marshal(run)
	if err != nil {
		return fmt.Errorf("encode replayed run %s: %w", e.RunID, err)
	}
	e.Payload = payload
	return nil
}

// Jobs reads a job's stored definition: store.Store's GetJob.
type Jobs interface {
	GetJob(ctx context.Context, id string) (store.Job, error)
}

// Current returns the job's current definition and its revision; ok is
// false when the job is gone (unknown or deleted), and then its dead runs
// are not replayed.
func Current(ctx context.Context, jobs Jobs, jobID string) (spec *sundialv1.JobSpec, revision int64, ok bool, _ error) {
	job, err := jobs.GetJob(ctx, jobID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, fmt.Errorf("read job %s: %w", jobID, err)
	}
	if job.Deleted {
		return nil, 0, false, nil
	}
	spec = &sundialv1.JobSpec{}
	if err := proto.Unmarshal(job.Spec, spec); err != nil {
		return nil, 0, false, fmt.Errorf("decode job %s: %w", jobID, err)
	}
	return spec, job.Revision, true, nil
}
