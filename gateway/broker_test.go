package gateway

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sundialhq/sundial/discovery"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/target"
)

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func setup(t *testing.T) (*Broker, *clock) {
	t.Helper()
	c := &clock{now: time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC)}
	b, err := New(Config{HeartbeatInterval: 10 * time.Millisecond, LostAfter: 3, MaxWait: time.Minute, Now: c.Now})
	require.NoError(t, err)
	return b, c
}

func req(team, handler, runID string) target.Request { return reqIn("", team, handler, runID) }

// reqIn is a request of a run of a job of pool.
func reqIn(pool, team, handler, runID string) target.Request {
	return target.Request{Run: &sundialv1.Run{RunId: runID, JobId: "j", OwnerTeam: team, Pool: pool, Attempt: 1, AttemptDueTime: timestamppb.New(time.Unix(0, 0)),
		Target: &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: handler}}}}, Output: &target.Output{}}
}

// waitQueued waits until the broker holds a task of team for handler, of
// the default pool.
func waitQueued(t *testing.T, b *Broker, team, handler string) {
	t.Helper()
	waitQueuedIn(t, b, team, "default", handler)
}

// waitQueuedIn waits until the broker holds a task of team for handler, of
// pool.
func waitQueuedIn(t *testing.T, b *Broker, team, pool, handler string) {
	t.Helper()
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.queues[key{team, pool, handler}]) > 0
	}, time.Minute, time.Millisecond)
}

func TestConfigValidateReportsEveryBadField(t *testing.T) {
	t.Parallel()
	err := Config{HeartbeatInterval: -1, LostAfter: -1, MaxWait: -1}.Validate()
	for _, want := range []string{"HeartbeatInterval: -1ns is not positive", "LostAfter: -1 is below 1", "MaxWait: -1ns is not positive"} {
		assert.ErrorContains(t, err, want)
	}
	assert.NoError(t, Config{}.Validate())
}

func TestPollGivesOnlyTheTeamsTasksOfItsHandlers(t *testing.T) {
	t.Parallel()
	b, _ := setup(t)
	ctx := t.Context()
	// Team b's worker has polled: the task waits for it (the clock stands
	// still, so it stays live).
	assert.Empty(t, b.poll(ctx, "team-b", "default", "b-1", []string{"work"}, 4, time.Millisecond))
	results := make(chan error, 1)
	go func() { results <- b.HandleAttempt(ctx, req("team-b", "work", "b@1")) }()
	waitQueued(t, b, "team-b", "work")
	assert.Empty(t, b.poll(ctx, "team-a", "default", "a-1", []string{"work"}, 4, time.Millisecond), "team a took team b's task")
	assert.Empty(t, b.poll(ctx, "team-b", "default", "b-1", []string{"other"}, 4, time.Millisecond), "a worker took a handler it does not serve")
	got := b.poll(ctx, "team-b", "default", "b-1", []string{"other", "work"}, 4, time.Millisecond)
	require.Len(t, got, 1)

	_, _, err := b.heartbeat("team-a", got[0].Token)
	assert.ErrorIs(t, err, ErrUnknownTask)
	_, err = b.complete("team-a", got[0].Token, Outcome{})
	assert.ErrorIs(t, err, ErrUnknownTask)
	_, beat, err := b.heartbeat("team-b", got[0].Token)
	require.NoError(t, err)
	assert.Empty(t, beat.Stop)
	stale, err := b.complete("team-b", got[0].Token, Outcome{Err: target.Fail("boom", false, nil), Lines: []string{"l1"}})
	require.NoError(t, err)
	assert.False(t, stale)
	var te *target.Error
	require.ErrorAs(t, <-results, &te)
	assert.Equal(t, "boom", te.Code)
	_, err = b.complete("team-b", got[0].Token, Outcome{})
	assert.ErrorIs(t, err, ErrUnknownTask, "a task completed twice")
}

func TestPollGivesOnlyTheTasksOfTheWorkersPool(t *testing.T) {
	t.Parallel()
	b, _ := setup(t)
	ctx := t.Context()
	assert.Empty(t, b.poll(ctx, "team-a", "blue", "blue-1", []string{"work"}, 4, time.Millisecond))
	assert.Empty(t, b.poll(ctx, "team-a", "green", "green-1", []string{"work"}, 4, time.Millisecond))
	results := make(chan error, 1)
	go func() { results <- b.HandleAttempt(ctx, reqIn("green", "team-a", "work", "a@1")) }()
	waitQueuedIn(t, b, "team-a", "green", "work")
	assert.Empty(t, b.poll(ctx, "team-a", "blue", "blue-1", []string{"work"}, 4, time.Millisecond), "the blue pool's worker took a green job's run")
	assert.Empty(t, b.poll(ctx, "team-a", "default", "blue-1", []string{"work"}, 4, time.Millisecond), "a default pool's worker took a green job's run")
	got := b.poll(ctx, "team-a", "green", "green-1", []string{"work"}, 4, time.Millisecond)
	require.Len(t, got, 1)
	assert.Equal(t, "green", got[0].Pool)
	_, err := b.complete("team-a", got[0].Token, Outcome{})
	require.NoError(t, err)
	require.NoError(t, <-results)
}

func TestServedListsLiveWorkersPerTeam(t *testing.T) {
	t.Parallel()
	b, c := setup(t)
	b.poll(t.Context(), "team-a", "default", "a-1", []string{"x", "y"}, 1, time.Millisecond)
	b.poll(t.Context(), "team-b", "default", "b-1", []string{"x"}, 1, time.Millisecond)
	b.poll(t.Context(), "team-a", "blue", "a-2", []string{"z"}, 1, time.Millisecond)
	assert.Equal(t, []discovery.ServedHandler{{Team: "team-a", Name: "z", Pool: "blue"}, {Team: "team-a", Name: "x", Pool: "default"},
		{Team: "team-a", Name: "y", Pool: "default"}, {Team: "team-b", Name: "x", Pool: "default"}}, b.Served())
	assert.True(t, b.Serves("default", "team-a", "y"))
	assert.False(t, b.Serves("default", "team-b", "y"))
	assert.True(t, b.Serves("blue", "team-a", "z"))
	assert.False(t, b.Serves("default", "team-a", "z"), "a pool's worker serves another pool")
	assert.False(t, b.Serves("blue", "team-a", "x"), "a pool's worker serves another pool")
	c.add(30 * time.Millisecond) // LostAfter intervals without a poll
	assert.False(t, b.Serves("default", "team-a", "x"))
	assert.Empty(t, b.Served())
}

func TestSilentWorkerIsLostAndTheAttemptRetryable(t *testing.T) {
	t.Parallel()
	b, c := setup(t)
	ctx := t.Context()
	b.poll(ctx, "team-a", "default", "a-1", []string{"work"}, 1, time.Millisecond)
	results := make(chan error, 1)
	go func() { results <- b.HandleAttempt(ctx, req("team-a", "work", "a@1")) }()
	waitQueued(t, b, "team-a", "work")
	got := b.poll(ctx, "team-a", "default", "a-1", []string{"work"}, 1, time.Millisecond)
	require.Len(t, got, 1)
	c.add(time.Second) // no heartbeat since
	err := <-results
	var te *target.Error
	require.ErrorAs(t, err, &te)
	assert.Equal(t, CodeWorkerLost, te.Code)
	assert.True(t, te.Retryable)
	_, beat, herr := b.heartbeat("team-a", got[0].Token)
	require.NoError(t, herr)
	assert.Equal(t, CodeWorkerLost, beat.Stop, "the lost worker is told to stop")
	stale, cerr := b.complete("team-a", got[0].Token, Outcome{})
	require.NoError(t, cerr)
	assert.True(t, stale, "a lost worker's late outcome is taken")
}

func TestCancelledAttemptTellsItsWorkerToStop(t *testing.T) {
	t.Parallel()
	b, _ := setup(t)
	b.poll(t.Context(), "team-a", "default", "a-1", []string{"work"}, 1, time.Millisecond)
	ctx, cancel := context.WithCancelCause(t.Context())
	results := make(chan error, 1)
	go func() { results <- b.HandleAttempt(ctx, req("team-a", "work", "a@1")) }()
	waitQueued(t, b, "team-a", "work")
	got := b.poll(t.Context(), "team-a", "default", "a-1", []string{"work"}, 1, time.Millisecond)
	require.Len(t, got, 1)
	cause := errors.New("cancelled by an operator")
	cancel(cause)
	assert.ErrorIs(t, <-results, cause)
	_, beat, err := b.heartbeat("team-a", got[0].Token)
	require.NoError(t, err)
	assert.Equal(t, "cancelled", beat.Stop)
}

func TestUntakenTaskFailsWhenNoWorkerServesIt(t *testing.T) {
	t.Parallel()
	b, _ := setup(t)
	var te *target.Error
	// Nobody ever polled for it: retryable, the runs goes elsewhere.
	require.ErrorAs(t, b.HandleAttempt(t.Context(), req("team-a", "work", "a@1")), &te)
	assert.Equal(t, CodeWorkerLost, te.Code)
	b.mu.Lock()
	defer b.mu.Unlock()
	assert.Empty(t, b.queues)
	assert.Empty(t, b.tasks)
}

func TestMetricsCountWorkersTasksAndOutcomesByTeam(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	c := &clock{now: time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC)}
	b, err := New(Config{HeartbeatInterval: 10 * time.Millisecond, LostAfter: 3, MaxWait: time.Minute, Now: c.Now, Registerer: reg})
	require.NoError(t, err)
	ctx := t.Context()
	assert.Empty(t, b.poll(ctx, "team-a", "default", "a-1", []string{"work"}, 4, time.Millisecond))
	assert.Empty(t, b.poll(ctx, "team-b", "default", "b-1", []string{"work"}, 4, time.Millisecond))
	results := make(chan error, 2)
	go func() { results <- b.HandleAttempt(ctx, req("team-a", "work", "a@1")) }()
	go func() { results <- b.HandleAttempt(ctx, req("team-a", "work", "a@2")) }()
	require.Eventually(t, func() bool { return b.state().queued["team-a"] == 2 }, time.Minute, time.Millisecond)

	got := b.poll(ctx, "team-a", "default", "a-1", []string{"work"}, 1, time.Millisecond)
	require.Len(t, got, 1)
	want := `
# HELP sundial_gateway_tasks Attempts this gateway holds, by team and state (queued: waiting for a worker; held: taken by a worker, in flight).
# TYPE sundial_gateway_tasks gauge
sundial_gateway_tasks{state="held",team="team-a"} 1
sundial_gateway_tasks{state="queued",team="team-a"} 1
# HELP sundial_gateway_workers Workers connected to this gateway (polling, or heard from within the lost-worker bound), by team.
# TYPE sundial_gateway_workers gauge
sundial_gateway_workers{team="team-a"} 1
sundial_gateway_workers{team="team-b"} 1
`
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "sundial_gateway_tasks", "sundial_gateway_workers"))

	stale, err := b.complete("team-a", got[0].Token, Outcome{Err: target.Fail("boom", false, errors.New("boom"))})
	require.NoError(t, err)
	assert.False(t, stale)
	assert.Error(t, <-results)
	assert.Equal(t, 1.0, testutil.ToFloat64(b.m.completes.WithLabelValues(completeFailure)))
	assert.Equal(t, 1, testutil.CollectAndCount(b.m.queueWait), "a task's queue wait is observed when it is taken")

	// The other task's only worker goes silent: the attempt fails as
	// worker_lost, counted for its team.
	c.add(time.Second)
	require.ErrorContains(t, <-results, "no live worker")
	assert.Equal(t, 1.0, testutil.ToFloat64(b.m.lost.WithLabelValues("team-a")))
	assert.Equal(t, 0, b.state().workers["team-a"], "a worker silent past the bound is not counted")
}
