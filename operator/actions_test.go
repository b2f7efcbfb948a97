package operator_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sundialhq/sundial/audit"
	"github.com/sundialhq/sundial/operator"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/store"
)

// TestOnRealStack runs each operator action against its own pipeline.
func TestOnRealStack(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"CancelRunningRun", testCancelRunningRun},
		{"TriggerAndWait", testTriggerAndWait},
		{"PauseHoldsRetry", testPauseHoldsRetry},
		{"Backfill", testBackfill},
		{"PlanApply", testPlanApply},
		{"SuspendAndResume", testSuspendAndResume},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t)
		})
	}
}

// testCancelRunningRun: a long-running HTTP call is cancelled: the
// downstream sees its request end, CANCELLED (reason cancelled) is the run's
// terminal event, and no further attempt is made: a later run of the same
// job finishes with the cancelled one still at one request. Cancelling it
// again says it is not running.
func testCancelRunningRun(t *testing.T) {
	p := newPipeline(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	started := make(chan string, 4)
	ended := make(chan string, 4)
	d := newDownstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		run := r.Header.Get("Idempotency-Key")
		if r.URL.Query().Get("block") == "" {
			return // 200
		}
		started <- run
		<-r.Context().Done()
		ended <- run
	})
	const id = "ops.long-call"
	spec := job(id, httpTarget(d.URL+"/?block=1"))
	spec.Timeout = nil
	spec.Retry = &sundialv1.RetryPolicy{MaxAttempts: 5}
	p.apply(spec)

	tr, err := p.op.Trigger(ctx, id, operator.TriggerOptions{})
	require.NoError(t, err)
	select {
	case run := <-started:
		require.Equal(t, tr.RunID, run)
	case <-ctx.Done():
		t.Fatal("the run never reached the downstream")
	}
	require.Eventually(t, func() bool {
		// The lease is taken before the request is sent, so this holds
		// at once; it is asked of Redis as Cancel will.
		_, err := p.op.Cancel(ctx, id, "not-a-run", operator.CancelOptions{})
		return errors.Is(err, operator.ErrNotRunning)
	}, time.Minute, 50*time.Millisecond)

	asked := time.Now()
	res, err := p.op.Cancel(ctx, id, tr.RunID, operator.CancelOptions{Wait: true})
	if err != nil {
		holding, herr := p.leases.Holding(t.Context(), id, tr.RunID)
		t.Logf("cancel failed after %s: requests of the run at the downstream %d; lease held %v (%v); its events:%s",
			time.Since(asked), d.requests(tr.RunID), holding, herr, p.runEvents(tr.RunID))
	}
	require.NoError(t, err)
	select {
	case run := <-ended:
		assert.Equal(t, tr.RunID, run)
		t.Logf("the downstream saw its request end %s after the cancel was asked", time.Since(asked))
	case <-ctx.Done():
		t.Fatal("the downstream's request never ended")
	}
	require.NotNil(t, res.Event)
	assert.Equal(t, sundialv1.RunState_RUN_STATE_CANCELLED, res.Event.GetState(), "event %v", res.Event)
	assert.Equal(t, "cancelled", res.Event.GetReason())
	assert.Equal(t, uint32(1), res.Event.GetAttempt())

	_, err = p.op.Cancel(ctx, id, tr.RunID, operator.CancelOptions{})
	assert.ErrorIs(t, err, operator.ErrNotRunning, "a finished run is not running")

	// No retry: a later run of the job (same shard, same runs partition)
	// ends while the cancelled run still has one request.
	spec.Target = httpTarget(d.URL + "/")
	p.apply(spec)
	fence, err := p.op.Trigger(ctx, id, operator.TriggerOptions{Wait: true})
	require.NoError(t, err)
	require.True(t, fence.Succeeded(), "fence run: %v", fence.Event)
	assert.Equal(t, 1, d.requests(tr.RunID), "attempts of the cancelled run")
	assert.Contains(t, p.audit.kinds(), "cancel "+id+" "+tr.RunID)
}

// testTriggerAndWait: a triggered run is followed to its end: SUCCEEDED
// for a job that works, DEAD for one whose downstream fails, SKIPPED for
// a paused job, whose trigger is refused.
func testTriggerAndWait(t *testing.T) {
	p := newPipeline(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	d := newDownstream(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.WriteHeader(http.StatusBadRequest) // not retryable
	})
	p.apply(job("ops.works", noopTarget()))
	failing := job("ops.fails", httpTarget(d.URL))
	failing.Retry = &sundialv1.RetryPolicy{MaxAttempts: 1}
	p.apply(failing)

	ok, err := p.op.Trigger(ctx, "ops.works", operator.TriggerOptions{Wait: true})
	require.NoError(t, err)
	assert.True(t, ok.Succeeded(), "event %v", ok.Event)
	assert.Equal(t, ok.RunID, ok.Event.GetRunId())

	bad, err := p.op.Trigger(ctx, "ops.fails", operator.TriggerOptions{Wait: true})
	require.NoError(t, err)
	assert.False(t, bad.Succeeded())
	assert.Equal(t, sundialv1.RunState_RUN_STATE_DEAD, bad.Event.GetState(), "event %v", bad.Event)

	_, err = p.op.Pause(ctx, "ops.works")
	require.NoError(t, err)
	refused, err := p.op.Trigger(ctx, "ops.works", operator.TriggerOptions{Wait: true})
	require.NoError(t, err)
	assert.Equal(t, sundialv1.RunState_RUN_STATE_SKIPPED, refused.Event.GetState(), "event %v", refused.Event)
	assert.Equal(t, "paused", refused.Event.GetReason())
}

// testPauseHoldsRetry: a run fails while its job is being paused; its
// retry is held, not run, for as long as the job is paused, and runs once
// the job is resumed.
func testPauseHoldsRetry(t *testing.T) {
	p := newPipeline(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	first := make(chan struct{})
	release := make(chan struct{})
	d := newDownstream(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		if n == 1 {
			close(first)
			<-release
			// Retry-After is the least delay of the retry: longer than
			// the dispatcher's JobFeedMaxLag, so its firing sees the pause.
			w.Header().Set("Retry-After", "6")
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	const id = "ops.paused"
	spec := job(id, httpTarget(d.URL))
	spec.Retry = &sundialv1.RetryPolicy{MaxAttempts: 3}
	p.apply(spec)

	tr, err := p.op.Trigger(ctx, id, operator.TriggerOptions{})
	require.NoError(t, err)
	<-first
	paused, err := p.op.Pause(ctx, id)
	require.NoError(t, err)
	require.True(t, paused.Changed)
	again, err := p.op.Pause(ctx, id)
	require.NoError(t, err)
	assert.False(t, again.Changed, "pausing a paused job changes nothing")
	close(release)

	var held []store.DueEntry
	require.Eventually(t, func() bool {
		held, err = p.store.ListHeld(ctx, id)
		require.NoError(t, err)
		return len(held) == 1
	}, 2*time.Minute, 100*time.Millisecond, "the retry was not held")
	assert.Equal(t, store.KindRetry, held[0].Kind)
	assert.Equal(t, tr.RunID, held[0].RunID)
	assert.Equal(t, 2, held[0].Attempt)
	assert.Equal(t, 1, d.requests(tr.RunID), "the held retry ran")

	since := time.Now()
	resumed, err := p.op.Resume(ctx, id)
	require.NoError(t, err)
	require.True(t, resumed.Changed)
	ev, err := p.op.WaitRun(ctx, tr.RunID, since)
	require.NoError(t, err)
	assert.Equal(t, sundialv1.RunState_RUN_STATE_SUCCEEDED, ev.GetState(), "event %v", ev)
	assert.Equal(t, uint32(2), ev.GetAttempt())
	assert.Equal(t, 2, d.requests(tr.RunID))
	left, err := p.store.ListHeld(ctx, id)
	require.NoError(t, err)
	assert.Empty(t, left)
	assert.Contains(t, p.audit.kinds(), "pause "+id+" ")
	assert.Contains(t, p.audit.kinds(), "resume "+id+" ")
}

// testBackfill: a backfill of 1,000 occurrences of an every-second job runs
// each once, never more than its cap at once at the downstream, previews
// its count without running anything on a dry run, and repeated, runs
// nothing again.
func testBackfill(t *testing.T) {
	p := newPipeline(t)
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	d := newDownstream(t, func(http.ResponseWriter, *http.Request, int) {
		time.Sleep(20 * time.Millisecond) // a call that takes time, so runs overlap
	})
	const id = "ops.backfilled"
	// An every-second job, created paused so that nothing but the backfill
	// runs it at first.
	spec := job(id, httpTarget(d.URL))
	spec.Schedule.Kind = &sundialv1.Schedule_Cron{Cron: &sundialv1.Cron{Expression: "* * * * * *"}}
	spec.Paused = true
	p.apply(spec)

	to := time.Now().Add(-time.Hour).Truncate(time.Second)
	opts := operator.BackfillOptions{From: to.Add(-1000 * time.Second), To: to, MaxConcurrent: 8, DryRun: true}
	preview, err := p.op.Backfill(ctx, id, opts)
	require.NoError(t, err)
	require.Len(t, preview.Occurrences, 1000)
	assert.Zero(t, preview.Enqueued)

	// A paused job holds the backfill's triggers: resume it first.
	_, err = p.op.Resume(ctx, id)
	require.NoError(t, err)
	// Resuming starts the every-second chain from now; the backfilled
	// range is an hour back, so the two never share a run id, and the
	// downstream counts the backfilled runs apart.
	d.count(func(run string) bool { return operator.JobOfRun(run) == id && run < store.RunID(id, to) })
	opts.DryRun = false
	res, err := p.op.Backfill(ctx, id, opts)
	require.NoError(t, err)
	assert.Equal(t, 1000, res.Enqueued)
	assert.Equal(t, 1000, res.Finished[sundialv1.RunState_RUN_STATE_SUCCEEDED], "finished %v", res.Finished)
	for _, due := range preview.Occurrences {
		require.Equal(t, 1, d.requests(store.RunID(id, due)), "run %s", store.RunID(id, due))
	}
	d.mu.Lock()
	maxSeen := d.maxSeen
	d.mu.Unlock()
	assert.LessOrEqual(t, maxSeen, opts.MaxConcurrent, "requests at once at the downstream")
	t.Logf("at most %d backfilled requests at once (cap %d)", maxSeen, opts.MaxConcurrent)

	again, err := p.op.Backfill(ctx, id, opts)
	require.NoError(t, err)
	assert.Zero(t, again.Enqueued, "a repeated backfill runs nothing again")
	assert.Equal(t, 1000, again.AlreadyDone)
	for _, due := range preview.Occurrences {
		require.Equal(t, 1, d.requests(store.RunID(id, due)))
	}
	assert.Contains(t, p.audit.kinds(), fmt.Sprintf("backfill %s ", id))
}

// testPlanApply: the preview of a changed definition lists the changed
// fields, the next fire times of the new schedule and the load it adds to
// its shard in the next hour; nothing is produced (the stored definition
// is unchanged).
func testPlanApply(t *testing.T) {
	p := newPipeline(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const id = "ops.planned"
	spec := job(id, noopTarget())
	p.apply(spec)
	before, err := p.store.GetJob(ctx, id)
	require.NoError(t, err)

	changed := job(id, noopTarget())
	changed.Schedule.GetCron().Expression = "*/15 * * * *"
	plans, err := p.op.PlanApply(ctx, []*sundialv1.JobSpec{changed, job("ops.new", noopTarget()), {Id: "bad id"}}, 3)
	require.NoError(t, err)
	require.Len(t, plans, 3)

	pl := plans[0]
	assert.False(t, pl.Created)
	assert.Equal(t, []audit.Change{{Field: "schedule.cron.expression", Before: `"0 3 1 1 *"`, After: `"*/15 * * * *"`}}, pl.Changes)
	require.Len(t, pl.NextFires, 3)
	for i, f := range pl.NextFires {
		assert.Zero(t, f.Minute()%15, "fire %d at %s", i, f)
		if i > 0 {
			assert.Equal(t, 15*time.Minute, f.Sub(pl.NextFires[i-1]))
		}
	}
	total := 0
	for b, n := range pl.Load {
		assert.Equal(t, 1, n, "bucket %s", b)
		total += n
	}
	assert.Equal(t, 4, total, "four quarter hours in the next hour")
	assert.Equal(t, store.ShardOf(id, shards), pl.Shard)

	assert.True(t, plans[1].Created)
	assert.NotEmpty(t, plans[2].Errors)

	after, err := p.store.GetJob(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, before.Revision, after.Revision, "nothing was produced")
}
