package operator

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/types/known/timestamppb"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// TriggerOptions are Trigger's options.
type TriggerOptions struct {
	// IdempotencyKey makes a trigger sent twice run once; default the run
	// id this call asks for, which is unique to the millisecond.
	IdempotencyKey string
	// Payload replaces the job's payload for this run; nil keeps it.
	Payload []byte
	// Wait: return only once the run's terminal event is out.
	Wait bool
	// Caller names who asked, carried by the trigger.
	Caller string
}

// TriggerResult is the outcome of Trigger.
type TriggerResult struct {
	// RunID is the run the trigger starts: job id + "@" + the trigger's
	// requested time in ms. A trigger whose idempotency key was seen
	// before starts no run of this id (the earlier one stands).
	RunID string
	// Event is the run's terminal event (with Wait).
	Event *sundialv1.RunEvent
}

// Succeeded says whether the waited-for run succeeded.
func (r TriggerResult) Succeeded() bool {
	return r.Event.GetState() == sundialv1.RunState_RUN_STATE_SUCCEEDED
}

// Trigger produces a Trigger for jobID, due now. With Wait it follows
// sundial.events until the run ends; a refused trigger (paused or unknown
// job) ends as SKIPPED.
func (o *Operator) Trigger(ctx context.Context, jobID string, opts TriggerOptions) (TriggerResult, error) {
	if err := o.need("trigger", map[string]bool{"Producer": o.cfg.Producer != nil}); err != nil {
		return TriggerResult{}, err
	}
	at := store.Truncate(o.cfg.Now())
	res := TriggerResult{RunID: store.RunID(jobID, at)}
	var (
		f   *follower
		err error
	)
	if opts.Wait {
		if f, err = o.follow(ctx); err != nil {
			return res, err
		}
		defer f.close()
	}
	t := &sundialv1.Trigger{JobId: jobID, IdempotencyKey: opts.IdempotencyKey, RequestedAt: timestamppb.New(at), Payload: opts.Payload, Caller: opts.Caller}
	if t.IdempotencyKey == "" {
		t.IdempotencyKey = res.RunID
	}
	if _, err := o.cfg.Producer.SendTrigger(ctx, t); err != nil {
		return res, fmt.Errorf("trigger job %q: %w", jobID, err)
	}
	o.record(ctx, Action{Kind: "trigger", JobID: jobID, RunID: res.RunID})
	if f == nil {
		return res, nil
	}
	res.Event, err = f.waitRun(ctx, res.RunID)
	return res, err
}
