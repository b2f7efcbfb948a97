package history

import (
	"time"

	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// Records returns what ev writes to history: the new state of its attempt,
// and for RETRYING the next attempt as scheduled. An event that changes no
// attempt (unknown state) writes nothing.
func Records(ev *sundialv1.RunEvent) []store.RunRecord {
	at := ev.GetTime().AsTime()
	base := store.RunRecord{
		JobID: ev.GetJobId(), RunID: ev.GetRunId(), Attempt: int(ev.GetAttempt()),
		Due: ev.GetDueTime().AsTime(), AttemptDue: ev.GetAttemptDueTime().AsTime(), UpdatedAt: at,
		OwnerTeam: ev.GetOwnerTeam(), WaitReason: ev.GetWaitReason(),
	}
	if t := ev.GetDispatchedTime(); t != nil {
		base.Dispatched = t.AsTime()
	} else if ev.GetState() == sundialv1.RunState_RUN_STATE_ENQUEUED {
		base.Dispatched = at
	}
	if t := ev.GetReceivedTime(); t != nil {
		base.Received = t.AsTime()
	}
	if t := ev.GetLeasedTime(); t != nil {
		base.Leased = t.AsTime()
	}
	if ev.GetDueTime() == nil {
		base.Due = base.AttemptDue
	}
	if ev.GetAttemptDueTime() == nil {
		base.AttemptDue = time.Time{}
	}
	finished := func(r store.RunRecord) store.RunRecord {
		r.Finished = at
		r.Log = ev.GetLog()
		if d := ev.GetDuration(); d != nil {
			r.Duration = d.AsDuration()
			r.Started = at.Add(-r.Duration)
		}
		// The start as the runner took it, when the event carries it:
		// a short attempt's STARTED is not produced (its outcome carries
		// the start instead).
		if t := ev.GetStartedTime(); t != nil {
			r.Started = t.AsTime()
		}
		return r
	}
	errText := func() string {
		e := ev.GetError()
		if e == nil {
			return ""
		}
		if e.GetMessage() == "" {
			return e.GetCode()
		}
		return e.GetCode() + ": " + e.GetMessage()
	}
	r := base
	switch ev.GetState() {
	case sundialv1.RunState_RUN_STATE_ENQUEUED:
		r.State = store.StateScheduled
	case sundialv1.RunState_RUN_STATE_DEFERRED:
		r.State = store.StateScheduled
		if t := ev.GetNextAttemptDueTime(); t != nil {
			r.AttemptDue = t.AsTime()
		}
		r.Error = "deferred: " + ev.GetReason()
	case sundialv1.RunState_RUN_STATE_STARTED:
		r.State = store.StateRunning
		r.Started = at
	case sundialv1.RunState_RUN_STATE_SUCCEEDED:
		r = finished(r)
		r.State = store.StateSucceeded
	case sundialv1.RunState_RUN_STATE_FAILED, sundialv1.RunState_RUN_STATE_TIMED_OUT:
		r = finished(r)
		r.State = store.StateFailed
		r.Error = errText()
	case sundialv1.RunState_RUN_STATE_DEAD:
		r = finished(r)
		r.State = store.StateFailed
		r.Error = "dead: " + errText()
	case sundialv1.RunState_RUN_STATE_SKIPPED:
		r.State = store.StateSkipped
		r.Error = ev.GetReason()
	case sundialv1.RunState_RUN_STATE_CANCELLED:
		r = finished(r)
		r.State = store.StateCancelled
		r.Error = ev.GetReason()
	case sundialv1.RunState_RUN_STATE_SUSPENDED:
		// Not finished: a resume writes STARTED over it, under the same
		// run id and attempt.
		r.State = store.StateSuspended
		r.Error = ev.GetReason()
	case sundialv1.RunState_RUN_STATE_RETRYING:
		// The failed attempt keeps what FAILED wrote; the next one is now
		// scheduled.
		next := base
		next.Attempt++
		// The wait and the times were the failed attempt's.
		next.WaitReason, next.Dispatched, next.Received, next.Leased = "", time.Time{}, time.Time{}, time.Time{}
		next.State = store.StateScheduled
		next.AttemptDue = ev.GetNextAttemptDueTime().AsTime()
		return []store.RunRecord{next}
	default:
		return nil
	}
	return []store.RunRecord{r}
}
