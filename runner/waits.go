package runner

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/discovery"
	"github.com/sundialhq/sundial/lateness"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

// times sets the delivery's timeline on ev: the run's dispatch time, and
// the received, leased and started times reached so far, with the wait
// judged at the lease (judgeWait).
func (e *runEvents) times(ev *sundialv1.RunEvent) {
	ev.DispatchedTime = e.run.GetDispatchedAt()
	ts := func(t time.Time) *timestamppb.Timestamp {
		if t.IsZero() {
			return nil
		}
		return timestamppb.New(t)
	}
	ev.ReceivedTime, ev.LeasedTime, ev.StartedTime = ts(e.received), ts(e.leased), ts(e.started)
	ev.WaitReason = string(e.wait)
}

// directorySyncWait bounds how long judgeWait waits for a Directory that
// has not read sundial.executors up to date yet (a runner that just
// started): without it the runner cannot tell whether an executor was live.
const directorySyncWait = 10 * time.Second

// receiptWait is the wait between the run's dispatch and its receipt
// (lateness.ReceiptWait), judged before the lease is taken.
func (x *execution) receiptWait(ctx context.Context) lateness.Wait {
	dispatched := x.dispatched()
	if dispatched.IsZero() || x.ev.received.Sub(dispatched) <= x.r.cfg.WaitBound {
		return lateness.Wait{}
	}
	return lateness.Wait{
		Reason: lateness.ReceiptWait(dispatched, x.ev.received, x.r.cfg.WaitBound, x.liveAt(ctx, dispatched)),
		For:    x.ev.received.Sub(dispatched),
	}
}

// dispatched is when the run record was written, zero if it does not say.
func (x *execution) dispatched() time.Time {
	if d := x.run.GetDispatchedAt(); d != nil {
		return d.AsTime()
	}
	return time.Time{}
}

// judgeWait names the delivery's longest wait beyond Config.WaitBound, at
// the lease (package lateness): a catch-up between due and dispatch, the
// receipt wait (no executor or a backlog between dispatch and receipt), a
// full pool between receipt and lease.
func (x *execution) judgeWait(receipt lateness.Wait) lateness.Reason {
	r, run, ev := x.r, x.run, x.ev
	bound := r.cfg.WaitBound
	due, dispatched := attemptDue(run), x.dispatched()
	return lateness.Longest(
		lateness.Wait{Reason: lateness.DispatchWait(run.GetOrigin(), due, dispatched, bound), For: dispatched.Sub(due)},
		receipt,
		lateness.Wait{Reason: lateness.QueueWait(ev.received, ev.leased, bound), For: ev.leased.Sub(ev.received)},
	)
}

// liveAt reports whether the Directory knew an executor live at t. A
// Directory not read up to date within directorySyncWait is taken to have
// known one: the runner does not claim "no executor" without knowing.
func (x *execution) liveAt(ctx context.Context, t time.Time) bool {
	d := x.r.routes.directory
	if d == nil {
		return true
	}
	if s, ok := d.(interface{ Synced() <-chan struct{} }); ok {
		timer := time.NewTimer(directorySyncWait)
		defer timer.Stop()
		select {
		case <-s.Synced():
		case <-timer.C:
			return true
		case <-ctx.Done():
			return true
		}
	}
	all := d.All()
	members := make([]lateness.Member, 0, len(all))
	for _, m := range all {
		members = append(members, lateness.Member{Started: m.Started, Gone: m.State != discovery.Live, LastSeen: m.Heartbeat})
	}
	return lateness.LiveAt(members, t)
}
