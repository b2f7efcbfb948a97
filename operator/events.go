package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sundialhq/sundial/internal/startoffsets"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// followBack is how far before an action the events follower starts: more
// than the clock skew between this process and the brokers, so no event
// of the action falls before it. Events of other runs read in that span are
// skipped by run id.
const followBack = 10 * time.Second

// terminal says whether a run's state ends it.
func terminal(s sundialv1.RunState) bool {
	switch s {
	case sundialv1.RunState_RUN_STATE_SUCCEEDED, sundialv1.RunState_RUN_STATE_DEAD,
		sundialv1.RunState_RUN_STATE_CANCELLED, sundialv1.RunState_RUN_STATE_SKIPPED:
		return true
	}
	return false
}

// follower reads sundial.events from a little before it was made, without
// joining a consumer group.
type follower struct {
	cl *kgo.Client
}

func (o *Operator) follow(ctx context.Context) (*follower, error) {
	return o.followFrom(ctx, o.cfg.Now().Add(-followBack))
}

// followFrom starts each partition of sundial.events where
// startoffsets.Since says for since, not at kgo's AfterMilli offset: in a
// partition holding no event from since on, that offset falls back on an end
// looked up after the lookup by time, and an event appended in between (the
// STARTED and CANCELLED of a run an action has just reached) would never be
// read.
func (o *Operator) followFrom(ctx context.Context, since time.Time) (*follower, error) {
	if len(o.cfg.Kafka) == 0 {
		return nil, errors.New("operator: waiting for a run: Config.Kafka: required")
	}
	topic := o.cfg.Topics.Events()
	opts := append([]kgo.Opt{
		// Only for a reset after an offset out of range: the start
		// offsets are set below.
		kgo.ConsumeResetOffset(kgo.NewOffset().AfterMilli(since.UnixMilli())),
		kgo.FetchMaxWait(200 * time.Millisecond),
	}, o.cfg.Kafka...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("operator: events follower: %w", err)
	}
	starts, err := startoffsets.Since(ctx, kadm.NewClient(cl), topic, since)
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("operator: events follower: %w", err)
	}
	parts := map[int32]kgo.Offset{}
	for p, off := range starts {
		parts[p] = kgo.NewOffset().At(off)
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts})
	return &follower{cl: cl}, nil
}

func (f *follower) close() { f.cl.Close() }

// next returns the run events read next, until ctx ends.
func (f *follower) next(ctx context.Context) ([]*sundialv1.RunEvent, error) {
	for {
		fs := f.cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var errs []error
		fs.EachError(func(topic string, p int32, err error) {
			errs = append(errs, fmt.Errorf("read %s partition %d: %w", topic, p, err))
		})
		if len(errs) > 0 {
			return nil, errors.Join(errs...)
		}
		var out []*sundialv1.RunEvent
		fs.EachRecord(func(rec *kgo.Record) {
			if ev, ok := runEvent(rec); ok {
				out = append(out, ev)
			}
		})
		if len(out) > 0 {
			return out, nil
		}
	}
}

// runEvent decodes a RunEvent; DAG run events and undecodable records are
// not.
func runEvent(rec *kgo.Record) (*sundialv1.RunEvent, bool) {
	ev, ok, err := topics.DecodeRunEvent(rec)
	if err != nil || !ok || ev.GetRunId() == "" {
		return nil, false
	}
	return ev, true
}

// waitRun returns the terminal event of runID.
func (f *follower) waitRun(ctx context.Context, runID string) (*sundialv1.RunEvent, error) {
	return f.waitState(ctx, runID, terminal)
}

// waitState returns the first event of runID whose state is one of want.
func (f *follower) waitState(ctx context.Context, runID string, want func(sundialv1.RunState) bool) (*sundialv1.RunEvent, error) {
	for {
		evs, err := f.next(ctx)
		if err != nil {
			return nil, fmt.Errorf("wait for run %s: %w", runID, err)
		}
		for _, ev := range evs {
			if ev.GetRunId() == runID && want(ev.GetState()) {
				return ev, nil
			}
		}
	}
}

// WaitRun returns the terminal event of runID (SUCCEEDED, DEAD, CANCELLED
// or SKIPPED), reading sundial.events from since (less followBack, for
// clock skew) until ctx ends.
func (o *Operator) WaitRun(ctx context.Context, runID string, since time.Time) (*sundialv1.RunEvent, error) {
	f, err := o.followFrom(ctx, since.Add(-followBack))
	if err != nil {
		return nil, err
	}
	defer f.close()
	return f.waitRun(ctx, runID)
}
