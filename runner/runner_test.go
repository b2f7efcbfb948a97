package runner

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sundialhq/sundial/leasing"
	sundialv1 "github.com/sundialhq/sundial/proto/sundial/v1"
	"github.com/sundialhq/sundial/runner/breaker"
	"github.com/sundialhq/sundial/runner/target"
	"github.com/sundialhq/sundial/store"
)

const (
	started   = sundialv1.RunState_RUN_STATE_STARTED
	succeeded = sundialv1.RunState_RUN_STATE_SUCCEEDED
	failed    = sundialv1.RunState_RUN_STATE_FAILED
	retrying  = sundialv1.RunState_RUN_STATE_RETRYING
	dead      = sundialv1.RunState_RUN_STATE_DEAD
	skipped   = sundialv1.RunState_RUN_STATE_SKIPPED
	cancelled = sundialv1.RunState_RUN_STATE_CANCELLED
	timedOut  = sundialv1.RunState_RUN_STATE_TIMED_OUT
	deferred  = sundialv1.RunState_RUN_STATE_DEFERRED
)

// wait bounds every wait for a condition in these tests. It is generous
// because the tests share a busy machine (and run under -race): a
// condition is waited for, never a duration, so a passing test takes no
// longer for it.
const wait = 3 * time.Minute

func waitStates(t *testing.T, h *harness, runID string, want ...sundialv1.RunState) {
	t.Helper()
	if !assert.Eventually(t, func() bool { return len(h.events.states(runID)) >= len(want) }, wait, 10*time.Millisecond) {
		require.FailNow(t, "run did not reach its states", "run %s: events %s, want %v", runID, h.events.describe(runID), want)
	}
	assert.Equal(t, want, h.events.states(runID), "run %s: events %s", runID, h.events.describe(runID))
}

func TestRunsSucceedOnceAndCommit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakeBackends(t), steadyTTL)
	r := h.start(nil)
	now := time.Now()
	var runs []*sundialv1.Run
	for i := range 30 {
		runs = append(runs, h.run("job-"+strconv.Itoa(i%7), now.Add(time.Duration(i)*time.Millisecond), nil))
	}
	h.produce(runs...)
	for _, run := range runs {
		waitStates(t, h, run.GetRunId(), started, succeeded)
		assert.Equal(t, 1, h.down.requestsOf(run.GetRunId()), "the idempotency key is the run id")
	}
	effects, dup, _ := h.down.counts()
	assert.Equal(t, 30, effects)
	assert.Zero(t, dup)
	// Every offset gets committed.
	require.Eventually(t, func() bool {
		sum := int64(0)
		for _, off := range r.in.committedView() {
			sum += max(off, 0)
		}
		return sum == 30
	}, wait, 10*time.Millisecond)
	ev := h.events.all()[0]
	assert.Equal(t, "runner-0", ev.GetRunnerId())
	assert.NotZero(t, ev.GetFencingToken())
}

func TestRedeliveredRunIsNotExecutedAgain(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakeBackends(t), steadyTTL)
	h.start(nil)
	run := h.run("dup", time.Now(), nil)
	h.produce(run)
	waitStates(t, h, run.GetRunId(), started, succeeded)
	// The same run again (a dispatcher re-emitting after a crash), followed
	// by a marker run to know the duplicate was consumed.
	marker := h.run("marker", time.Now(), nil)
	h.produce(run, marker)
	waitStates(t, h, marker.GetRunId(), started, succeeded)
	assert.Equal(t, []sundialv1.RunState{started, succeeded}, h.events.states(run.GetRunId()))
	assert.Equal(t, 1, h.down.requestsOf(run.GetRunId()))
}

func TestRetryThenSucceed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakeBackends(t), steadyTTL)
	h.down.set(func(_ *http.Request, n int) (int, http.Header) {
		if n <= 2 {
			return http.StatusServiceUnavailable, nil
		}
		return http.StatusOK, nil
	})
	h.start(nil)
	run := h.run("flaky", time.Now(), nil)
	h.produce(run)
	waitStates(t, h, run.GetRunId(), started, failed, retrying, started, failed, retrying, started, succeeded)
	var attempts []uint32
	for _, ev := range h.events.all() {
		if ev.GetState() == started {
			attempts = append(attempts, ev.GetAttempt())
		}
		if ev.GetState() == failed {
			assert.Equal(t, "http_503", ev.GetError().GetCode())
		}
	}
	assert.Equal(t, []uint32{1, 2, 3}, attempts)
	entries := h.enq.Entries()
	require.Len(t, entries, 2)
	for i, e := range entries {
		assert.Equal(t, store.KindRetry, e.Kind)
		assert.Equal(t, run.GetRunId(), e.RunID, "a retry keeps the run id")
		assert.Equal(t, i+2, e.Attempt)
		next := &sundialv1.Run{}
		require.NoError(t, proto.Unmarshal(e.Payload, next))
		assert.EqualValues(t, i+2, next.GetAttempt())
		assert.Equal(t, sundialv1.RunOrigin_RUN_ORIGIN_RETRY, next.GetOrigin())
		assert.True(t, next.GetAttemptDueTime().AsTime().Equal(e.Due))
	}
	effects, dup, _ := h.down.counts()
	assert.Equal(t, 1, effects)
	assert.Zero(t, dup)
}

func TestRetryAfterIsTheMinimumDelay(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakeBackends(t), steadyTTL)
	h.down.set(func(_ *http.Request, n int) (int, http.Header) {
		if n == 1 {
			return http.StatusTooManyRequests, http.Header{"Retry-After": {"2"}}
		}
		return http.StatusOK, nil
	})
	h.start(nil)
	run := h.run("throttled", time.Now(), nil)
	h.produce(run)
	waitStates(t, h, run.GetRunId(), started, failed, retrying)
	var failedAt, nextDue time.Time
	for _, ev := range h.events.all() {
		switch ev.GetState() {
		case failed:
			failedAt = ev.GetTime().AsTime()
		case retrying:
			nextDue = ev.GetNextAttemptDueTime().AsTime()
		}
	}
	// The backoff would be at most 20ms; Retry-After says 2s.
	assert.GreaterOrEqual(t, nextDue.Sub(failedAt), 2*time.Second-5*time.Millisecond)
	waitStates(t, h, run.GetRunId(), started, failed, retrying, started, succeeded)
}

func TestExhaustedAndFinalFailuresGoToTheDeadLetterTopic(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakeBackends(t), steadyTTL)
	h.down.set(func(r *http.Request, _ int) (int, http.Header) {
		if r.URL.Path == "/final" {
			return http.StatusNotFound, nil
		}
		return http.StatusInternalServerError, nil
	})
	h.start(nil)
	final := h.run("final", time.Now(), nil)
	exhausted := h.run("exhausted", time.Now(), func(r *sundialv1.Run) { r.Retry.MaxAttempts = 2 })
	h.produce(final, exhausted)
	waitStates(t, h, final.GetRunId(), started, failed, dead)
	waitStates(t, h, exhausted.GetRunId(), started, failed, retrying, started, failed, dead)

	cl, err := kgo.NewClient(kgo.SeedBrokers(h.b.brokers...), kgo.ConsumeTopics(h.b.names.DLQ()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	got := map[string]*sundialv1.DeadLetter{}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for len(got) < 2 {
		fs := cl.PollFetches(ctx)
		require.NoError(t, fs.Err0())
		fs.EachRecord(func(r *kgo.Record) {
			dl := &sundialv1.DeadLetter{}
			require.NoError(t, proto.Unmarshal(r.Value, dl))
			got[dl.GetRun().GetRunId()] = dl
		})
	}
	assert.Equal(t, "http_404", got[final.GetRunId()].GetLastError().GetCode())
	assert.False(t, got[final.GetRunId()].GetLastError().GetRetryable())
	assert.EqualValues(t, 1, got[final.GetRunId()].GetAttempts())
	assert.Equal(t, "http_500", got[exhausted.GetRunId()].GetLastError().GetCode())
	assert.EqualValues(t, 2, got[exhausted.GetRunId()].GetAttempts())
}

func TestTimeoutIsRetryable(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakeBackends(t), steadyTTL)
	block := make(chan struct{})
	defer close(block)
	h.start(func(c *Config) {
		c.Handlers = map[string]target.Handler{"slow": target.HandlerFunc(func(ctx context.Context, run *sundialv1.Run) error {
			if run.GetAttempt() == 1 {
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		})}
	})
	run := h.run("slow", time.Now(), func(r *sundialv1.Run) {
		r.Target = &sundialv1.Target{Kind: &sundialv1.Target_Handler{Handler: &sundialv1.HandlerTarget{Name: "slow"}}}
		r.Timeout = durationpb.New(50 * time.Millisecond)
	})
	h.produce(run)
	waitStates(t, h, run.GetRunId(), started, timedOut, retrying, started, succeeded)
}

func TestOpenBreakerDefersWithoutSpendingAttempts(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakeBackends(t), steadyTTL)
	h.down.set(func(*http.Request, int) (int, http.Header) { return http.StatusBadGateway, nil })
	h.start(func(c *Config) {
		c.Concurrency = 1 // one at a time, so the breaker sees the failures in order
		c.Breakers = breaker.Config{Failures: 2, OpenTimeout: time.Hour}
	})
	var runs []*sundialv1.Run
	for i := range 4 {
		runs = append(runs, h.run("b"+strconv.Itoa(i), time.Now(), func(r *sundialv1.Run) { r.Retry.MaxAttempts = 1 }))
	}
	h.produce(runs[0], runs[1])
	waitStates(t, h, runs[0].GetRunId(), started, failed, dead)
	waitStates(t, h, runs[1].GetRunId(), started, failed, dead)
	// The breaker of the host is now open: later runs are deferred, their
	// attempt unchanged, and the host is not called.
	h.produce(runs[2], runs[3])
	for _, run := range runs[2:] {
		waitStates(t, h, run.GetRunId(), deferred)
		assert.Zero(t, h.down.requestsOf(run.GetRunId()))
	}
	defers := h.enq.Entries()
	require.Len(t, defers, 2)
	for _, e := range defers {
		assert.Equal(t, 1, e.Attempt, "a deferral spends no attempt")
		next := &sundialv1.Run{}
		require.NoError(t, proto.Unmarshal(e.Payload, next))
		assert.EqualValues(t, 1, next.GetAttempt())
		assert.Equal(t, sundialv1.RunOrigin_RUN_ORIGIN_DEFERRAL, next.GetOrigin())
		assert.Greater(t, time.Until(e.Due), 50*time.Minute, "deferred by the breaker's open timeout")
	}
	for _, ev := range h.events.all() {
		if ev.GetState() == deferred {
			assert.Equal(t, "circuit_open", ev.GetReason())
			assert.Equal(t, "breaker_open", ev.GetWaitReason(), "a deferral names its wait from the closed set")
		}
	}
}

// TestRunWhoseLeaseExpiredBeforeItStartedIsTriedAgain: the acquire took
// longer than the lease's trust (a loaded machine or a slow Redis), so the
// Keeper refuses to start. The runner gives the slot back and must try the
// record again itself: nobody else will deliver it while this runner owns
// the partition.
func TestRunWhoseLeaseExpiredBeforeItStartedIsTriedAgain(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakeBackends(t), steadyTTL)
	// The first reading of the leasing clock is the first acquire's start;
	// every later reading is two TTLs ahead, as if that call had taken that
	// long, past the lease's trust.
	var calls atomic.Int64
	ls, err := leasing.New(leasing.Config{Client: h.redis, KeyPrefix: h.b.prefix + "lease:", TTL: steadyTTL, Now: func() time.Time {
		if calls.Add(1) == 1 {
			return time.Now()
		}
		return time.Now().Add(2 * steadyTTL)
	}})
	require.NoError(t, err)
	h.leases = ls
	r := h.start(nil)
	run := h.run("slow-acquire", time.Now(), nil)
	h.produce(run)
	waitStates(t, h, run.GetRunId(), started, succeeded)
	assert.Equal(t, 1, h.down.requestsOf(run.GetRunId()))
	require.Eventually(t, func() bool {
		sum := int64(0)
		for _, off := range r.in.committedView() {
			sum += max(off, 0)
		}
		return sum == 1
	}, wait, 10*time.Millisecond, "the record is committed")
}
