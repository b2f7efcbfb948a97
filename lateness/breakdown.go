package lateness

import (
	"time"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// Times are the instants of one attempt's timeline; a zero one is unknown.
type Times struct {
	Due, Dispatched, Received, Leased, Started time.Time
}

// Step is one point of the timeline and the gap since the previous known
// point (0 for the first, or when At is unknown).
type Step struct {
	Name string
	At   time.Time
	Gap  time.Duration
}

// Breakdown returns the timeline due → dispatched → received → leased →
// started, each step with its gap from the previous known one.
func (t Times) Breakdown() []Step {
	steps := []Step{{Name: "due", At: t.Due}, {Name: "dispatched", At: t.Dispatched}, {Name: "received", At: t.Received},
		{Name: "leased", At: t.Leased}, {Name: "started", At: t.Started}}
	var prev time.Time
	for i := range steps {
		if steps[i].At.IsZero() {
			continue
		}
		if !prev.IsZero() {
			steps[i].Gap = steps[i].At.Sub(prev)
		}
		prev = steps[i].At
	}
	return steps
}

// Deferral is one wait a DEFERRED event reported: from At until Until.
type Deferral struct {
	Reason Reason
	At     time.Time
	Until  time.Time
}

// Explanation is what a run's events tell of one attempt's timing.
type Explanation struct {
	Attempt uint32
	Times   Times
	// Deferrals are the attempt's DEFERRED waits, in event order.
	Deferrals []Deferral
	// Reason is the attempt's last reported wait reason.
	Reason Reason
}

// Explain returns, per attempt in order of first appearance, what events
// (one run's, in publication order) tell of its timing: the dispatched time
// of its last ENQUEUED or of its events, and the received, leased and
// started times of its newest delivery that reported them.
func Explain(events []*sundialv1.RunEvent) []Explanation {
	var out []Explanation
	index := map[uint32]int{}
	for _, ev := range events {
		i, ok := index[ev.GetAttempt()]
		if !ok {
			i = len(out)
			index[ev.GetAttempt()] = i
			out = append(out, Explanation{Attempt: ev.GetAttempt()})
		}
		x := &out[i]
		t := &x.Times
		if ev.GetAttemptDueTime() != nil && ev.GetState() != sundialv1.RunState_RUN_STATE_DEFERRED {
			t.Due = ev.GetAttemptDueTime().AsTime()
		} else if t.Due.IsZero() && ev.GetDueTime() != nil {
			t.Due = ev.GetDueTime().AsTime()
		}
		if ev.GetState() == sundialv1.RunState_RUN_STATE_ENQUEUED && ev.GetTime() != nil {
			t.Dispatched = ev.GetTime().AsTime()
		}
		set := func(dst *time.Time, ts interface{ AsTime() time.Time }, valid bool) {
			if valid {
				*dst = ts.AsTime()
			}
		}
		set(&t.Dispatched, ev.GetDispatchedTime(), ev.GetDispatchedTime() != nil)
		set(&t.Received, ev.GetReceivedTime(), ev.GetReceivedTime() != nil)
		set(&t.Leased, ev.GetLeasedTime(), ev.GetLeasedTime() != nil)
		set(&t.Started, ev.GetStartedTime(), ev.GetStartedTime() != nil)
		if ev.GetState() == sundialv1.RunState_RUN_STATE_STARTED && ev.GetStartedTime() == nil && ev.GetTime() != nil {
			t.Started = ev.GetTime().AsTime()
		}
		if r := Reason(ev.GetWaitReason()); r != None {
			x.Reason = r
		}
		if ev.GetState() == sundialv1.RunState_RUN_STATE_DEFERRED {
			r := Reason(ev.GetWaitReason())
			if r == None {
				r = OfDeferral(ev.GetReason())
			}
			if r != None {
				x.Reason = r
			}
			x.Deferrals = append(x.Deferrals, Deferral{Reason: r, At: ev.GetTime().AsTime(), Until: ev.GetNextAttemptDueTime().AsTime()})
			// The deferral's delivery is over: the next one is received,
			// leased and started anew.
			t.Received, t.Leased, t.Started = time.Time{}, time.Time{}, time.Time{}
		}
	}
	return out
}
