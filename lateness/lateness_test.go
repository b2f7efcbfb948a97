package lateness_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/lateness"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
)

var t0 = time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC)

func TestReceiptWait(t *testing.T) {
	t.Parallel()
	bound := 2 * time.Second
	for _, tc := range []struct {
		name                 string
		dispatched, received time.Time
		live                 bool
		want                 lateness.Reason
	}{
		{"on time", t0, t0.Add(100 * time.Millisecond), false, lateness.None},
		{"at the bound", t0, t0.Add(bound), false, lateness.None},
		{"no executor live at dispatch", t0, t0.Add(20 * time.Second), false, lateness.NoExecutor},
		{"runners live but behind", t0, t0.Add(20 * time.Second), true, lateness.Backlog},
		{"dispatch time unknown", time.Time{}, t0, false, lateness.None},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, lateness.ReceiptWait(tc.dispatched, tc.received, bound, tc.live))
		})
	}
}

func TestLiveAt(t *testing.T) {
	t.Parallel()
	at := t0.Add(10 * time.Second)
	for _, tc := range []struct {
		name    string
		members []lateness.Member
		want    bool
	}{
		{"none", nil, false},
		{"started after", []lateness.Member{{Started: at.Add(time.Second)}}, false},
		{"live since before", []lateness.Member{{Started: t0}}, true},
		{"left before", []lateness.Member{{Started: t0, Gone: true, LastSeen: at.Add(-time.Second)}}, false},
		{"left after", []lateness.Member{{Started: t0, Gone: true, LastSeen: at.Add(time.Second)}}, true},
		{"one of several", []lateness.Member{{Started: at.Add(time.Second)}, {Started: t0}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, lateness.LiveAt(tc.members, at))
		})
	}
}

func TestOfDeferral(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		reason string
		want   lateness.Reason
	}{
		{"no_executor", lateness.NoExecutor},
		{"executor_not_live", lateness.NoExecutor},
		{"no_worker", lateness.NoWorker},
		{"pool_busy", lateness.PoolBusy},
		{"team_quota", lateness.TeamQuota},
		{"team_rate", lateness.TeamRate},
		{"overlap_queue", lateness.Overlap},
		{"circuit_open", lateness.BreakerOpen},
		{"paused", lateness.None},
		{"", lateness.None},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			t.Parallel()
			got := lateness.OfDeferral(tc.reason)
			assert.Equal(t, tc.want, got)
			assert.True(t, got.Valid())
		})
	}
}

func TestReasonsAreClosed(t *testing.T) {
	t.Parallel()
	seen := map[lateness.Reason]bool{}
	for _, r := range lateness.Reasons {
		assert.True(t, r.Valid(), r)
		assert.False(t, seen[r], "duplicate %s", r)
		seen[r] = true
		assert.NotEqual(t, "-", r.Text())
	}
	assert.False(t, lateness.Reason("slow").Valid())
	assert.Equal(t, "no executor", lateness.NoExecutor.Text())
	assert.Equal(t, "-", lateness.None.Text())
}

func TestDispatchWait(t *testing.T) {
	t.Parallel()
	const bound = time.Second
	tests := []struct {
		name       string
		origin     sundialv1.RunOrigin
		dispatched time.Time
		want       lateness.Reason
	}{
		{"a missed run fired late by the misfire policy is a catch-up", sundialv1.RunOrigin_RUN_ORIGIN_CATCH_UP, t0.Add(5 * time.Second), lateness.CatchUp},
		{"a scheduled run written late is the dispatcher's delay", sundialv1.RunOrigin_RUN_ORIGIN_SCHEDULE, t0.Add(5 * time.Second), lateness.DispatchDelay},
		{"a trigger fired late while its shard had no owner is the dispatcher's delay", sundialv1.RunOrigin_RUN_ORIGIN_TRIGGER, t0.Add(time.Minute), lateness.DispatchDelay},
		{"a retry fired late is the dispatcher's delay", sundialv1.RunOrigin_RUN_ORIGIN_RETRY, t0.Add(2 * time.Second), lateness.DispatchDelay},
		{"a gap within the bound names nothing", sundialv1.RunOrigin_RUN_ORIGIN_SCHEDULE, t0.Add(bound), lateness.None},
		{"a catch-up within the bound names nothing", sundialv1.RunOrigin_RUN_ORIGIN_CATCH_UP, t0.Add(bound), lateness.None},
		{"an unknown dispatch time names nothing", sundialv1.RunOrigin_RUN_ORIGIN_SCHEDULE, time.Time{}, lateness.None},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, lateness.DispatchWait(tt.origin, t0, tt.dispatched, bound))
		})
	}
}

func TestQueueWait(t *testing.T) {
	t.Parallel()
	bound := time.Second
	assert.Equal(t, lateness.PoolFull, lateness.QueueWait(t0, t0.Add(3*time.Second), bound))
	assert.Equal(t, lateness.None, lateness.QueueWait(t0, t0.Add(bound), bound))
	assert.Equal(t, lateness.None, lateness.QueueWait(time.Time{}, t0, bound))
}

func TestLongest(t *testing.T) {
	t.Parallel()
	assert.Equal(t, lateness.None, lateness.Longest())
	assert.Equal(t, lateness.None, lateness.Longest(lateness.Wait{For: time.Hour}))
	assert.Equal(t, lateness.NoExecutor, lateness.Longest(
		lateness.Wait{Reason: lateness.PoolFull, For: 3 * time.Second},
		lateness.Wait{Reason: lateness.NoExecutor, For: 20 * time.Second},
		lateness.Wait{Reason: lateness.CatchUp, For: time.Second}))
}

func TestExplain(t *testing.T) {
	t.Parallel()
	ts := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(t0.Add(d)) }
	events := []*sundialv1.RunEvent{
		{Attempt: 1, State: sundialv1.RunState_RUN_STATE_ENQUEUED, Time: ts(10 * time.Millisecond), DueTime: ts(0), AttemptDueTime: ts(0)},
		{Attempt: 1, State: sundialv1.RunState_RUN_STATE_DEFERRED, Time: ts(21 * time.Second), DueTime: ts(0), AttemptDueTime: ts(0),
			Reason: "team_quota", NextAttemptDueTime: ts(22 * time.Second), ReceivedTime: ts(21 * time.Second)},
		{Attempt: 1, State: sundialv1.RunState_RUN_STATE_ENQUEUED, Time: ts(22 * time.Second), DueTime: ts(0), AttemptDueTime: ts(22 * time.Second)},
		{Attempt: 1, State: sundialv1.RunState_RUN_STATE_STARTED, Time: ts(23 * time.Second), DueTime: ts(0), AttemptDueTime: ts(22 * time.Second),
			DispatchedTime: ts(22 * time.Second), ReceivedTime: ts(22500 * time.Millisecond), LeasedTime: ts(22900 * time.Millisecond),
			StartedTime: ts(23 * time.Second)},
		{Attempt: 1, State: sundialv1.RunState_RUN_STATE_SUCCEEDED, Time: ts(24 * time.Second), DueTime: ts(0), AttemptDueTime: ts(22 * time.Second),
			DispatchedTime: ts(22 * time.Second), ReceivedTime: ts(22500 * time.Millisecond), LeasedTime: ts(22900 * time.Millisecond),
			StartedTime: ts(23 * time.Second)},
	}
	got := lateness.Explain(events)
	require.Len(t, got, 1)
	x := got[0]
	assert.Equal(t, lateness.TeamQuota, x.Reason)
	require.Len(t, x.Deferrals, 1)
	assert.Equal(t, lateness.Deferral{Reason: lateness.TeamQuota, At: t0.Add(21 * time.Second), Until: t0.Add(22 * time.Second)}, x.Deferrals[0])
	steps := x.Times.Breakdown()
	require.Len(t, steps, 5)
	want := []time.Duration{0, 0, 500 * time.Millisecond, 400 * time.Millisecond, 100 * time.Millisecond}
	for i, s := range steps {
		assert.Equal(t, want[i], s.Gap, s.Name)
	}
	assert.Equal(t, t0.Add(22*time.Second), steps[0].At, "the attempt's newest due time")
}

func TestBreakdownSkipsUnknown(t *testing.T) {
	t.Parallel()
	steps := lateness.Times{Due: t0, Started: t0.Add(7 * time.Second)}.Breakdown()
	assert.Equal(t, time.Duration(0), steps[1].Gap)
	assert.Equal(t, 7*time.Second, steps[4].Gap)
}
