package dagengine

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/sundialhq/sundial/dagengine/dagrun"
	"github.com/sundialhq/sundial/internal/consume"
	"github.com/sundialhq/sundial/internal/topics"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// eventsLoop consumes sundial.events. Each poll's run events are grouped by
// DAG run, each group is applied in one conditional write (a 1,000-way
// fan-in costs a handful of writes, not a thousand), and the poll's offsets
// are committed only after every group is saved and its work carried out.
func (e *Engine) eventsLoop(ctx context.Context, cl *kgo.Client) {
	for {
		fetches := cl.PollRecords(ctx, e.cfg.EventsMaxPoll)
		if fetches.IsClientClosed() || ctx.Err() != nil {
			cl.AllowRebalance()
			return
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			if !errors.Is(err, context.Canceled) {
				e.cfg.Logger.Warn("fetch failed; the client retries", "topic", topic, "partition", partition, "err", err)
			}
		})
		recs := fetches.Records()
		if len(recs) > 0 && e.processEvents(ctx, recs) {
			if err := consume.CommitPoll(ctx, cl, e.backoff("commit"), recs); err != nil && ctx.Err() == nil {
				e.cfg.Logger.Warn("commit abandoned; the poll's events will be applied again", "records", len(recs), "err", err)
			}
		}
		cl.AllowRebalance()
	}
}

// processEvents applies a poll's run events; false means ctx ended first.
func (e *Engine) processEvents(ctx context.Context, recs []*kgo.Record) bool {
	b := groupEvents(recs, e.malformed)
	g := &errgroup.Group{}
	g.SetLimit(e.cfg.Concurrency)
	for _, id := range b.order {
		inputs := b.groups[id]
		g.Go(func() error {
			e.applyEvents(ctx, id, inputs)
			return nil
		})
	}
	_ = g.Wait() // the closures never fail
	return ctx.Err() == nil
}

// malformed counts and logs a run event that does not decode.
func (e *Engine) malformed(rec *kgo.Record, err error) {
	e.runs.m.events.WithLabelValues("malformed").Inc()
	e.cfg.Logger.Warn("run event does not decode; skipped", "topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "err", err)
}

// eventBatch is a poll's run events of DAG nodes, grouped by DAG run, the
// runs in the order their first event came.
type eventBatch struct {
	order  []string
	groups map[string][]dagrun.Input
}

// groupEvents picks the run events of DAG nodes out of recs (dagNodeEvent)
// and groups them by DAG run, in the order read. Records that do not
// decode are handed to malformed and left out.
func groupEvents(recs []*kgo.Record, malformed func(*kgo.Record, error)) eventBatch {
	b := eventBatch{groups: map[string][]dagrun.Input{}}
	for _, rec := range recs {
		ev, ok, err := dagNodeEvent(rec)
		if err != nil {
			malformed(rec, err)
			continue
		}
		if !ok {
			continue
		}
		id := ev.GetDagRunId()
		if _, seen := b.groups[id]; !seen {
			b.order = append(b.order, id)
		}
		b.groups[id] = append(b.groups[id], dagrun.RunEvent{
			RunID: ev.GetRunId(), Node: ev.GetDagNodeId(), Attempt: int(ev.GetAttempt()), State: ev.GetState(),
		})
	}
	return b
}

// dagNodeEvent returns the RunEvent of a DAG node in rec, or false for any
// other record: a DagRunEvent, a run outside any DAG, an ENQUEUED event;
// the error is a RunEvent that does not decode.
//
// Nearly every record of sundial.events is the event of a run outside any
// DAG, so those must cost next to nothing: a record whose DAG run header
// (topics.DagRunOf) is there and empty is passed by undecoded. A record
// without the header was written before it existed and is decoded to tell,
// so a topic that still holds such records, or writers not yet upgraded,
// lose no DAG event.
func dagNodeEvent(rec *kgo.Record) (*sundialv1.RunEvent, bool, error) {
	if id, marked := topics.DagRunOf(rec); marked && id == "" {
		return nil, false, nil
	}
	ev, ok, err := topics.DecodeRunEvent(rec)
	if err != nil || !ok {
		return nil, false, err
	}
	// ENQUEUED (the dispatcher wrote the run) changes no node's state:
	// applying it would only read and rewrite the DAG run for nothing.
	if ev.GetDagRunId() == "" || ev.GetState() == sundialv1.RunState_RUN_STATE_ENQUEUED {
		return nil, false, nil
	}
	return ev, true, nil
}

// applyEvents applies one DAG run's events, retrying transient errors until
// ctx ends. Events of an unknown run, or of a run that cannot be decoded,
// are dropped: no retry can help them.
func (e *Engine) applyEvents(ctx context.Context, id string, inputs []dagrun.Input) {
	var res Result
	err := e.retry(ctx, "apply_events", func() error {
		var err error
		res, err = e.runs.Apply(ctx, id, inputs...)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, store.ErrNotFound):
			e.runs.m.events.WithLabelValues("unknown_dag_run").Add(float64(len(inputs)))
			e.cfg.Logger.Warn("run events of an unknown DAG run; dropped", "dag_run", id, "events", len(inputs))
			res.Applied = -1
			return nil
		case errors.Is(err, ErrPermanent):
			e.runs.m.events.WithLabelValues("failed").Add(float64(len(inputs)))
			e.cfg.Logger.Error("DAG run cannot be processed; its events are dropped", "dag_run", id, "events", len(inputs), "err", err)
			res.Applied = -1
			return nil
		}
		return err
	})
	if err != nil || res.Applied < 0 {
		return
	}
	e.runs.m.events.WithLabelValues("applied").Add(float64(res.Applied))
	e.runs.m.events.WithLabelValues("ignored").Add(float64(len(inputs) - res.Applied))
}
